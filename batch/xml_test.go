package batch

import (
	"fmt"
	"strings"
	"testing"

	"github.com/spoolq/spool"

	"golang.org/x/text/encoding/htmlindex"
)

// el expects XML record element e on line.
func el(e, line int64, json string) want { return want{line: line, element: e, json: json} }

// elBad expects XML record element e on line to fail with err.
func elBad(e, line int64, err string) want { return want{line: line, element: e, err: err} }

func TestXMLFile(t *testing.T) {
	data := testdata(t, "orders.xml")
	recs := readAll(t, "orders.xml", data, Format{Kind: XML, Record: "Order"})
	checkRecords(t, data, recs, []want{
		el(1, 8, `{"id":"1","channel":"web","order_no":"A-1","amount":{"currency":"EUR","#text":"10.00"},`+
			`"line":[{"sku":"p1","#text":"2"},{"sku":"p2","#text":"1"}],"note":"<b>bold</b> & more","empty":""}`),
		elBad(2, 16, "element 2 (line 16): XML syntax error on line 16: element <bad> closed by </Order>"),
		el(3, 17, `{"id":"3","order_no":"A-2","amount":"7 & 8"}`),
		elBad(4, 19, "element 4 (line 19): XML syntax error on line 19: invalid character entity &unknown; (only XML's five and character references are expanded, not those a DOCTYPE declares)"),
		el(5, 20, `{"id":"5","order_no":"A-3"}`),
		elBad(6, 21, `element <Order> has an attribute and a child element both named "order_no"`),
		elBad(7, 22, "element 7 (line 22): the record has no end tag: </Orders> closes the element around it first"),
	})
	r, err := Open(strings.NewReader(string(data)), "orders.xml", Format{Kind: XML, Record: "Order"})
	if err != nil {
		t.Fatal(err)
	}
	for {
		rec, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if rec.Element == 2 {
			d := r.DeadLetter(rec)
			if want := "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + `<Order xmlns="urn:example:orders" xmlns:x="urn:example:x" id="2"><order_no>A-1</order_no><amount>12.50</amount><bad></Order>`; string(d.Content) != want || d.Name != "orders~E2.xml" {
				t.Errorf("dead letter %s:\n%s\nwant:\n%s", d.Name, d.Content, want)
			}
			break
		}
	}
}

func TestXML(t *testing.T) {
	order := Format{Kind: XML, Record: "Order"}
	for _, c := range []struct {
		name, data string
		f          Format
		want       []want
	}{
		{"entities a DOCTYPE declares (billion laughs, XXE) are not expanded",
			"<!DOCTYPE o [<!ENTITY a \"aa\"><!ENTITY b \"&a;&a;\"><!ENTITY x SYSTEM \"file:///etc/passwd\">]>\n<os><Order n=\"&b;\"/><Order n=\"&x;\"/><Order n=\"&amp;&#65;\"/></os>", order,
			[]want{elBad(1, 2, "invalid character entity &b; (only XML's five and character references are expanded"), elBad(2, 2, "invalid character entity &x;"), el(3, 2, `{"n":"&A"}`)}},
		{"a UTF-8 mark and a declaration of another encoding", "\ufeff<?xml version=\"1.0\" encoding=\"windows-1252\"?><os/>", Format{Kind: XML, Record: "Order", Encoding: "windows-1252"},
			[]want{{line: 1, element: 1, err: `the file starts with UTF-8's byte order mark, and its XML declaration names the encoding "windows-1252" (windows-1252): remove the one that is wrong`, tail: true}}},
		{"empty file", "", order, []want{{line: 1, element: 1, err: "no root element: the file is not an XML document", tail: true}}},
		{"only a declaration and comments", "<?xml version=\"1.0\"?>\n<!-- none -->\n", order,
			[]want{{line: 3, element: 1, err: "no root element", tail: true}}},
		{"no records", "<Orders><Other/></Orders>", order, nil},
		{"the record is the root", "<Order id=\"1\"><a>x</a></Order>\n", order, []want{el(1, 1, `{"id":"1","a":"x"}`)}},
		{"empty record", "<r><Order/><Order></Order></r>", order, []want{el(1, 1, `{}`), el(2, 1, `{}`)}},
		{"text of the record", "<r><Order>hello</Order><Order>  </Order></r>", order, []want{el(1, 1, `{"#text":"hello"}`), el(2, 1, `{}`)}},
		{"nested record of the same name is a child", "<r><Order id=\"1\"><Order id=\"2\"/></Order></r>", order,
			[]want{el(1, 1, `{"id":"1","Order":{"id":"2"}}`)}},
		{"deep children", "<r><Order><a><b><c>1</c></b></a></Order></r>", order, []want{el(1, 1, `{"a":{"b":{"c":"1"}}}`)}},
		{"mixed content", "<r><Order><p>Hi <b>you</b> there</p></Order></r>", order, []want{el(1, 1, `{"p":{"b":"you","#text":"Hi  there"}}`)}},
		{"repeated children in between", "<r><Order><l>1</l><m>x</m><l>2</l></Order></r>", order, []want{el(1, 1, `{"l":["1","2"],"m":"x"}`)}},
		{"namespaced attributes of one local name", `<r xmlns:a="urn:a" xmlns:b="urn:b"><Order a:id="1" b:id="2"/></r>`, order,
			[]want{elBad(1, 1, `element <Order> has two attributes "id"`)}},
		{"quotes and > in attributes", `<r><Order note="a > b" q='"'/></r>`, order, []want{el(1, 1, `{"note":"a > b","q":"\""}`)}},
		{"comment, pi and cdata with tags inside a record", "<r><Order><!-- </Order> --><?p </Order>?><a><![CDATA[</Order>]]></a></Order></r>", order,
			[]want{el(1, 1, `{"a":"</Order>"}`)}},
		{"lines", "<r>\n<Order>\n<a>1</a>\n</Order>\n\n<Order\n id=\"2\"/>\n</r>\n", order, []want{el(1, 2, `{"a":"1"}`), el(2, 6, `{"id":"2"}`)}},
		{"a stray < in a record", "<r><Order><a>1 < 2</a></Order><Order/></r>", order,
			[]want{elBad(1, 1, "XML syntax error on line 1"), el(2, 1, `{}`)}},
		{"bad attribute", "<r><Order a=1/><Order/></r>", order, []want{elBad(1, 1, "XML syntax error"), el(2, 1, `{}`)}},
		{"encoding declared as the queue's", `<?xml version="1.0" encoding="latin1"?><Order/>`, Format{Kind: XML, Record: "Order", Encoding: "windows-1252"}, []want{el(1, 1, `{}`)}},
		{"not xml", `{"msg_id": "1"}`, order, []want{{line: 1, element: 1, err: "text outside the root element", tail: true}}},
		{"not xml either", "a,b\n1,2\n", order, []want{{line: 1, element: 1, err: "text outside the root element", tail: true}}},
		{"declared encoding differs", `<?xml version="1.0" encoding="ISO-8859-2"?><Order/>`, Format{Kind: XML, Record: "Order", Encoding: "windows-1252"},
			[]want{{line: 1, element: 1, err: `the XML declaration names the encoding "ISO-8859-2" (iso-8859-2), and the queue reads windows-1252`, tail: true}}},
		{"declared encoding unknown", `<?xml version="1.0" encoding="x-klingon"?><Order/>`, order,
			[]want{{line: 1, element: 1, err: `names the encoding "x-klingon"`, tail: true}}},
		{"truncated inside a record", "<r><Order id=\"1\"/>\n<Order id=\"2\"><a>", order,
			[]want{el(1, 1, `{"id":"1"}`), {line: 2, element: 2, err: "element 2 (line 2): the file ends inside the record <Order>", tail: true}}},
		{"truncated after the records", "<r><Order id=\"1\"/>\n", order,
			[]want{el(1, 1, `{"id":"1"}`), {line: 2, element: 2, err: "the file ends before the end tag of <r>", tail: true}}},
		{"mismatched outer end tag", "<r><s><Order/></t><Order/></r>", order,
			[]want{el(1, 1, `{}`), {line: 1, element: 2, err: "end tag </t> where </s> belongs", tail: true}}},
		{"a second root", "<Order/><Order/>", order, []want{el(1, 1, `{}`), {line: 1, element: 2, err: "a second root element <Order>", tail: true}}},
		{"files joined", "<?xml version=\"1.0\"?>\n<r><Order/></r>\n<?xml version=\"1.0\"?>\n<r><Order a=\"1\"/></r>\n", order,
			[]want{el(1, 2, `{}`), {line: 4, element: 2, err: "a second root element <r>: files joined into one?", tail: true}}},
		{"text after the root", "<r><Order/></r>junk", order, []want{el(1, 1, `{}`), {line: 1, element: 2, err: "text outside the root element", tail: true}}},
		{"invalid markup outside records", "<r><Order/>< Order/></r>", order, []want{el(1, 1, `{}`), {line: 1, element: 2, err: "invalid markup", tail: true}}},
		{"unterminated comment", "<r><Order/><!-- ...", order, []want{el(1, 1, `{}`), {line: 1, element: 2, err: "the file ends inside markup", tail: true}}},
		{"too large record", "<r><Order a=\"1\"/><Order>" + strings.Repeat("<x>y</x>", 20) + "</Order><Order a=\"3\"/></r>", Format{Kind: XML, Record: "Order", MaxSize: 100},
			[]want{el(1, 1, `{"a":"1"}`), elBad(2, 1, "element 2 (line 1): a record of 175 bytes, over the limit of 100 bytes"), el(3, 1, `{"a":"3"}`)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			recs := readAll(t, "f.xml", []byte(c.data), c.f)
			checkRecords(t, []byte(c.data), recs, c.want)
			recs, err := readFrom(oneByte{strings.NewReader(c.data)}, "f.xml", c.f, Position{})
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, []byte(c.data), recs, c.want)
		})
	}
}

// TestXMLNesting: the names of open elements the lexer holds are
// bounded (maxNames), inside a record and around the records. A record
// nested past spool.MaxDepth fails alone and the records after it read;
// one of long names within the bounds reads, its end found by counting;
// elements around the records past the bounds are the rest of the file's
// failure. A file of 30 MB of nested start tags held 480 MB before.
func TestXMLNesting(t *testing.T) {
	order := Format{Kind: XML, Record: "Order"}
	deep := strings.Repeat("<a>", 100_000) + strings.Repeat("</a>", 100_000)
	data := "<r><Order>" + deep + "</Order><Order id=\"2\"/></r>"
	r, err := Open(strings.NewReader(data), "f.xml", order)
	if err != nil {
		t.Fatal(err)
	}
	var recs []Record
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		recs = append(recs, rec)
		if n := cap(r.xml.split.stack); n > spool.MaxDepth*2 {
			t.Fatalf("the lexer holds room for %d names inside a record", n)
		}
	}
	checkRecords(t, []byte(data), recs, []want{elBad(1, 1, "elements nested deeper than 512"), el(2, 1, `{"id":"2"}`)})

	long := strings.Repeat("n", 1000)
	var open, close, obj strings.Builder
	for i := range 80 { // 80 000 bytes of names, within the depth
		name := fmt.Sprintf("%s%d", long, i)
		open.WriteString("<" + name + ">")
		close.WriteString(fmt.Sprintf("</%s%d>", long, 79-i))
		obj.WriteString(`{"` + name + `":`)
	}
	data = "<r><Order>" + open.String() + "1" + close.String() + "</Order><Order id=\"2\"/></r>"
	recs = readAll(t, "f.xml", []byte(data), order)
	checkRecords(t, []byte(data), recs, []want{el(1, 1, obj.String()+`"1"`+strings.Repeat("}", 80)), el(2, 1, `{"id":"2"}`)})

	// A record whose own name is past the bounds (a prefix of 70 000
	// bytes) still ends at its end tag, and the next record reads.
	prefix := strings.Repeat("p", 70_000)
	data = "<r xmlns:" + prefix + "=\"urn:x\"><" + prefix + ":Order id=\"1\"></" + prefix + ":Order><Order id=\"2\"/></r>"
	recs = readAll(t, "f.xml", []byte(data), Format{Kind: XML, Record: "Order", MaxSize: 1 << 20})
	if len(recs) != 2 || recs[1].Err != nil || string(recs[1].JSON) != `{"id":"2"}` {
		t.Errorf("after a record of a long name: %s", describeAll(recs))
	}

	for _, c := range []struct{ name, around, err string }{
		{"deep", strings.Repeat("<w>", spool.MaxDepth), "elements nested deeper than 512 around the records"},
		{"long names", strings.Repeat("<"+long+">", 70), "longer than 65536 bytes in all"},
	} {
		data := "<r><Order id=\"1\"/>" + c.around + "<Order id=\"2\"/></r>"
		recs := readAll(t, "f.xml", []byte(data), order)
		checkRecords(t, []byte(data), recs, []want{el(1, 1, `{"id":"1"}`), {line: 1, element: 2, err: c.err, tail: true}})
	}
}

// TestXMLNote: a file read to its end whose root holds elements and none
// of the queue's records has a note that says so, naming the first
// element (and case, when only case differs); a file of records, or of a
// root alone, has none.
func TestXMLNote(t *testing.T) {
	for _, c := range []struct{ data, note string }{
		{"<Invoices><Invoice><id>1</id></Invoice></Invoices>", "no <Order> element, the queue's record, in the file, which holds <Invoice>: is the queue's record name right"},
		{"<Orders><order/></Orders>", "which holds <order>: record names are case-sensitive"},
		{"<Orders><Order/></Orders>", ""},
		{"<Orders><Count>1</Count><Order/></Orders>", ""},
		{"<Orders/>", ""},
		{"<Orders>\n</Orders>", ""},
	} {
		r, err := Open(strings.NewReader(c.data), "f.xml", Format{Kind: XML, Record: "Order"})
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
		if got := r.Note(); c.note == "" && got != "" || !strings.Contains(got, c.note) {
			t.Errorf("%s: note %q, want %q", c.data, got, c.note)
		}
	}
	r, err := Open(strings.NewReader("{}\n"), "f.jsonl", Format{Kind: JSONL})
	if err != nil {
		t.Fatal(err)
	}
	r.Next()
	if got := r.Note(); got != "" {
		t.Errorf("a JSON Lines file's note: %q", got)
	}
}

// TestXMLLongMarkup: what the lexer cannot hold, a tag longer than the
// window, is the rest of the file's failure; a long comment or CDATA
// section is scanned through.
func TestXMLLongMarkup(t *testing.T) {
	f := Format{Kind: XML, Record: "Order", MaxSize: 100}
	long := strings.Repeat("z", 2*chunk)
	data := "<r><!--" + long + "--><Order id=\"1\"/><Order><![CDATA[" + long + "]]></Order><Order id=\"3\"/><s a=\"" + long + "\"/><Order/></r>"
	recs := readAll(t, "f.xml", []byte(data), f)
	checkRecords(t, []byte(data), recs, []want{
		el(1, 1, `{"id":"1"}`),
		elBad(2, 1, "a record of 131099 bytes"),
		el(3, 1, `{"id":"3"}`),
		{line: 1, element: 4, err: "markup longer than", tail: true},
	})
}

// TestXMLRecordNameEncoded: a record name that is not ASCII is matched in
// the file's encoding.
func TestXMLRecordNameEncoded(t *testing.T) {
	text := "<一覧><注文 番号=\"1\"/><他/><注文><品>ソ</品><品>表</品></注文></一覧>"
	enc, _ := htmlindex.Get("shift_jis")
	data, err := enc.NewEncoder().Bytes([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	f := Format{Kind: XML, Record: "注文", Encoding: "shift_jis"}
	checkRecords(t, data, readAll(t, "f.xml", data, f), []want{
		el(1, 1, `{"番号":"1"}`),
		el(2, 1, `{"品":["ソ","表"]}`),
	})
}

// TestXMLFilesJoined: two documents joined into one file fail from the
// second root on, as one dead letter that is the second document, which
// replays as it was written.
func TestXMLFilesJoined(t *testing.T) {
	fm := Format{Kind: XML, Record: "Order"}
	doc := func(id string) string { return "<?xml version=\"1.0\"?>\n<r><Order id=\"" + id + "\"/></r>\n" }
	r, err := Open(strings.NewReader(doc("1")+doc("2")), "f.xml", fm)
	if err != nil {
		t.Fatal(err)
	}
	var tail Record
	for {
		rec, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if rec.Tail {
			tail = rec
			break
		}
	}
	d := r.DeadLetter(tail)
	back := readAll(t, d.Name, d.Content, fm)
	if len(back) != 1 || string(back[0].JSON) != `{"id":"2"}` {
		t.Errorf("the dead letter\n%s\nreads back as %s", d.Content, describeAll(back))
	}
}

// TestXMLDeadLetterNamespaces: a record's dead letter carries the
// namespace declarations in scope that its start tag does not make, so
// that an XML editor takes it, and reads back as the record did.
func TestXMLDeadLetterNamespaces(t *testing.T) {
	const decl = "<?xml version=\"1.0\"?>\n"
	for _, c := range []struct {
		name, data string
		want       []string // each record's dead letter, after the declaration
	}{
		{"a prefix of the root", `<n:rs xmlns:n="urn:a" a="1"><n:r n:k="v"><n:x>1</n:x></n:r></n:rs>`,
			[]string{`<n:r xmlns:n="urn:a" n:k="v"><n:x>1</n:x></n:r>`}},
		{"the default namespace", `<rs xmlns="urn:d"><r/><r>x</r></rs>`,
			[]string{`<r xmlns="urn:d"/>`, `<r xmlns="urn:d">x</r>`}},
		{"the innermost wins", `<rs xmlns:n='urn:a' xmlns:m="urn:m"><g xmlns:n="urn:b"><n:r/></g></rs>`,
			[]string{`<n:r xmlns:n="urn:b" xmlns:m="urn:m"/>`}},
		{"the record's own declaration stays alone", `<rs xmlns:n="urn:a" xmlns="urn:d"><n:r xmlns:n="urn:own" ><n:x/></n:r></rs>`,
			[]string{`<n:r xmlns="urn:d" xmlns:n="urn:own" ><n:x/></n:r>`}},
		{"a closed element's scope ends", `<rs><g xmlns:n="urn:a"><n:r/></g><h><r/></h><e xmlns:n="urn:e"/><r/></rs>`,
			[]string{`<n:r xmlns:n="urn:a"/>`, `<r/>`, `<r/>`}},
		{"none in scope", `<rs><r a="1">x</r></rs>`, []string{`<r a="1">x</r>`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fm := Format{Kind: XML, Record: "r"}
			data := decl + c.data
			for _, resumeAt := range []int{0, 1} {
				r, err := Open(noSeek{strings.NewReader(data)}, "f.xml", fm)
				if err != nil {
					t.Fatal(err)
				}
				if resumeAt > 0 {
					// Resumed, a reader knows the scope as one that read
					// the file from its start.
					all := readAll(t, "f.xml", []byte(data), fm)
					if err := r.Resume(all[resumeAt-1].After()); err != nil {
						t.Fatal(err)
					}
				}
				for i, want := range c.want[resumeAt:] {
					rec, err := r.Next()
					if err != nil {
						t.Fatal(err)
					}
					d := r.DeadLetter(rec)
					if got := string(d.Content); got != decl+want {
						t.Errorf("record %d (resumed at %d): dead letter\n%s\nwant\n%s", resumeAt+i+1, resumeAt, got, decl+want)
					}
					back := readAll(t, d.Name, d.Content, fm)
					if len(back) != 1 || string(back[0].JSON) != string(rec.JSON) {
						t.Errorf("record %d: the dead letter reads back as %s, want %s", resumeAt+i+1, describeAll(back), rec.JSON)
					}
				}
				if len(c.want) <= 1 {
					break
				}
			}
		})
	}
}

// TestXMLNil: an empty element whose xsi:nil is true is null (the field
// absent) when it is a field the contract reads, as .NET's XmlSerializer
// and SQL Server's FOR XML ... XSINIL write a null; the prefix bound to
// the XML Schema instance namespace by the elements around the record or
// by the record itself, and by no other. Other fields keep the attribute
// as ever, so that no record accepted before reads, or hashes, otherwise.
func TestXMLNil(t *testing.T) {
	const xsi = `"http://www.w3.org/2001/XMLSchema-instance"`
	c := spool.DefaultContract()
	c.Required = []string{"msg_id"}
	c.Headers.Tenant = "tenant"
	data := `<rs xmlns:xsi=` + xsi + ` xmlns:o="urn:other">` +
		`<r><msg_id>a</msg_id><amount xsi:nil="true"/><order_no xsi:nil=" 1 "></order_no><tenant xsi:nil="true" /><note xsi:nil="true"/></r>` +
		`<r xmlns:i=` + xsi + `><msg_id>b</msg_id><amount i:nil="true"/><seq xsi:nil="false"/><order_no o:nil="true"/><tenant xsi:nil="true">t</tenant></r>` +
		`<g xmlns:xsi="urn:not-xsi"><r><msg_id>c</msg_id><amount xsi:nil="true"/></r></g>` +
		`</rs>`
	recs := consumerRecords(t, Format{Kind: XML, Record: "r"}, c, "f.xml", data, "")
	for i, want := range []string{
		`{"msg_id":"a","amount":null,"order_no":null,"tenant":null,"note":{"nil":"true"}}`,
		`{"msg_id":"b","amount":null,"seq":{"nil":"false"},"order_no":{"nil":"true"},"tenant":{"nil":"true","#text":"t"}}`,
		`{"msg_id":"c","amount":{"nil":"true"}}`,
	} {
		if i >= len(recs) || string(recs[i].JSON) != want {
			t.Errorf("record %d: %s, want %s", i+1, recs[min(i, len(recs)-1)].JSON, want)
		}
	}
	if m, err := c.Parse(recs[0].JSON); err != nil || m.Amount != "" || m.OrderNo != "" {
		t.Errorf("a parses to %+v, %v: want no amount and no order key", m, err)
	}
}
