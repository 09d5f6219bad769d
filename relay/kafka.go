package relay

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/spoolq/spool"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka is the kafka://HOST:PORT/TOPIC target: a record per event on
// TOPIC, through franz-go's idempotent producer, acknowledged by all the
// in-sync replicas (acks=all). The record's key is the event's aggregate,
// so that the default partitioner puts an aggregate's events in one
// partition, where Kafka keeps their order; its value is the event's JSON
// document (Event.Body), and its headers are Spool-Event-Id (the event's
// id, the consumer's dedup key), Spool-Aggregate, Spool-Type and the
// event's own (Event.Headers).
//
// It is a Pipeline: up to Window records are buffered or in flight. The
// idempotent producer gives each record of a partition a sequence number,
// so that the broker neither stores a resent batch twice nor one batch
// after a later one; a record that fails (its delivery timeout,
// publishTimeout, run out) fails every later one of its partition with it,
// so none is stored after a failed one. Kafka does not dedup across
// producer sessions: an event sent again by a relay that restarted is
// stored again, and the consumer dedups on Spool-Event-Id.
//
// HOST:PORT is one broker of the cluster, from which the client learns
// the others. The topic must exist (the relay checks at start): its
// replication and min.insync.replicas are what acks=all waits for.
// Plain TCP only: no TLS or SASL.
type Kafka struct {
	cl    *kgo.Client
	topic string
}

// kafkaWindow is the Kafka target's Window: records buffered or awaiting
// their acknowledgement.
const kafkaWindow = 256

// OpenKafka connects to the cluster of u and checks that its topic exists.
func OpenKafka(ctx context.Context, u *url.URL) (*Kafka, error) {
	topic := strings.TrimPrefix(u.Path, "/")
	if u.Host == "" || topic == "" || strings.Contains(topic, "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("target %s: %w: want kafka://HOST:PORT/TOPIC", u.Redacted(), ErrBadTarget)
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(u.Host),
		kgo.ClientID("spool-relay"),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // with idempotence, franz-go's default: said here since it is the contract
		kgo.MaxBufferedRecords(kafkaWindow),
		kgo.RecordDeliveryTimeout(publishTimeout),
	)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", u.Redacted(), err)
	}
	if err := kafkaTopic(ctx, cl, topic); err != nil {
		cl.Close()
		return nil, fmt.Errorf("target %s: %w", u.Redacted(), err)
	}
	return &Kafka{cl: cl, topic: topic}, nil
}

// kafkaTopic checks that topic exists, asking the cluster's metadata.
func kafkaTopic(ctx context.Context, cl *kgo.Client, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("kafka metadata: %w", err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("kafka metadata: %d topics in the answer for one", len(resp.Topics))
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("%w: topic %s does not exist: create it with the replication the events need", ErrBadTarget, topic)
		}
		return fmt.Errorf("topic %s: %w", topic, err)
	}
	return nil
}

// Window is the most records buffered or awaiting their acknowledgement.
func (t *Kafka) Window() int { return kafkaWindow }

// Send produces e's record; done gets the cluster's acknowledgement.
func (t *Kafka) Send(ctx context.Context, e *Event, done func(error)) {
	body, err := e.Body()
	if err != nil {
		done(spool.Permanent(err))
		return
	}
	h := e.Headers()
	r := &kgo.Record{Key: []byte(e.Row.Aggregate), Value: body, Headers: make([]kgo.RecordHeader, 0, len(h)+3)}
	r.Headers = append(r.Headers,
		kgo.RecordHeader{Key: "Spool-Event-Id", Value: []byte(e.ID)},
		kgo.RecordHeader{Key: "Spool-Aggregate", Value: []byte(e.Row.Aggregate)},
		kgo.RecordHeader{Key: "Spool-Type", Value: []byte(e.Row.Type)})
	for k, v := range h {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	t.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
		if err == nil {
			done(nil)
			return
		}
		if errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) || errors.Is(err, kerr.InvalidRecord) {
			done(spool.Permanent(fmt.Errorf("kafka: %w", err)))
			return
		}
		done(fmt.Errorf("kafka: %w", err))
	})
}

// Publish produces e and waits for its acknowledgement.
func (t *Kafka) Publish(ctx context.Context, e *Event) error {
	return publishOne(ctx, t, e)
}

// Close closes the client; the relay has waited for every record.
func (t *Kafka) Close() error {
	t.cl.Close()
	return nil
}
