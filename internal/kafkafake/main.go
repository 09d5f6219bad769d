// Command kafkafake runs franz-go's in-process Kafka cluster (kfake) on
// loopback ports, for measuring and trying spool relay's kafka:// target
// where no Kafka server is installed (spool bench --relay kafka://...).
// It is not Kafka: one process, its log in memory, replication only
// simulated; what it measures is the clients, not a broker.
//
//	go run ./internal/kafkafake -topic events -partitions 16
//
// prints the target's URL (kafka://127.0.0.1:PORT/events) and serves
// until SIGINT or SIGTERM.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	topic := flag.String("topic", "events", "the topic to create")
	partitions := flag.Int("partitions", 16, "the topic's partitions")
	brokers := flag.Int("brokers", 3, "brokers in the cluster")
	port := flag.Int("port", 0, "the first broker's port (0: any free one)")
	flag.Parse()
	opts := []kfake.Opt{kfake.NumBrokers(*brokers), kfake.SeedTopics(int32(*partitions), *topic)}
	if *port != 0 {
		ports := make([]int, *brokers)
		for i := range ports {
			ports[i] = *port + i
		}
		opts = append(opts, kfake.Ports(ports...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafkafake:", err)
		os.Exit(1)
	}
	fmt.Printf("kafka://%s/%s\n", c.ListenAddrs()[0], *topic)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	c.Close()
}
