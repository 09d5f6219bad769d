package spool

// Kind is the JSON type of a field's value, as `spool schema` reports it.
type Kind string

// The JSON kinds. Integers and decimals are told apart because schema
// inference reports a field that mixes them as number.
const (
	KindString  Kind = "string"
	KindInteger Kind = "integer"
	KindNumber  Kind = "number" // a JSON number with a fraction or exponent
	KindBoolean Kind = "boolean"
	KindObject  Kind = "object"
	KindArray   Kind = "array"
	KindNull    Kind = "null"
)

// Field is one top-level member of a message, in document order.
type Field struct {
	Name string
	Kind Kind
	// Raw is the value's JSON text exactly as it appeared in the file.
	Raw []byte
}

// Amount is a money amount kept as the decimal text that was sent, in JSON
// number syntax ("-12.50", "12345678901234567.89"). It never passes through
// float64, so nothing is rounded on its way into the ledger.
type Amount string

// Message is a valid message: its contract fields extracted and checked,
// its other fields kept as they were.
type Message struct {
	// MsgID is the idempotency key; an integer key is kept as its decimal text.
	MsgID string
	// OrderNo is the ordering key; sequences are per OrderNo. An integer is
	// kept as its decimal text. Empty when the contract does not require it
	// and the message lacks it.
	OrderNo string
	// Seq is the order within OrderNo, >= 1; 0 when absent and not required.
	Seq int64
	// Amount is exact; empty when absent and not required.
	Amount Amount
	// Headers are the schema version, traceparent and tenant the message
	// carried, by the contract's HeaderFields.
	Headers MessageHeaders
	// Fields are all top-level fields in document order, contract fields
	// included.
	Fields []Field
	// Raw is the file's content.
	Raw []byte
}

// Field returns the named top-level field.
func (m *Message) Field(name string) (Field, bool) {
	for _, f := range m.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}
