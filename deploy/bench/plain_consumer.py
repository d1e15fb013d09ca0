#!/usr/bin/env python3
"""The peer of `reddot bench backlog`: a plain at-least-once Kafka consumer, as a team's first
script would be.

It reads RedDot's event JSON from a topic (confluent-kafka, librdkafka underneath), adds each
`incr`'s `by` to its node and to every ancestor (`root.chat.c7` also counts at `root.chat` and
`root`), writes each batch with one batched upsert (psycopg 3, `unnest` arrays, `ON CONFLICT ...
DO UPDATE`), commits the transaction, then commits the offsets to Kafka. No dedupe, no dead
letters, no versions, no change log: a crash between the two commits counts a batch twice.

It exits 0 once it has consumed --events records, and prints one JSON line with what it did.

    python3 deploy/bench/plain_consumer.py --brokers HOST:PORT --topic T --group G \
        --dsn postgresql://... --events N

Needs Debian's python3-confluent-kafka and python3-psycopg (or the PyPI packages).
"""
import argparse
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException
import psycopg

UPSERT = """
INSERT INTO peer_badge (user_id, path, count)
SELECT * FROM unnest(%s::text[], %s::text[], %s::bigint[])
ON CONFLICT (user_id, path) DO UPDATE SET count = peer_badge.count + excluded.count
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--dsn", required=True, help="libpq connection string of an empty database")
    parser.add_argument("--events", type=int, required=True, help="stop after this many records")
    parser.add_argument("--batch-size", type=int, default=5000)
    parser.add_argument("--timeout-seconds", type=float, default=600)
    args = parser.parse_args()

    with psycopg.connect(args.dsn) as connection:
        connection.execute(
            "CREATE TABLE IF NOT EXISTS peer_badge (user_id text, path text, count bigint NOT NULL, PRIMARY KEY (user_id, path))")
        connection.commit()
        consumer = Consumer({
            "bootstrap.servers": args.brokers,
            "group.id": args.group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        })
        consumer.subscribe([args.topic])
        started = time.monotonic()
        consumed = applied = batches = 0
        first_commit = None
        try:
            while consumed < args.events:
                if time.monotonic() - started > args.timeout_seconds:
                    print(json.dumps({"error": "timed out", "consumed": consumed}), flush=True)
                    return 1
                messages = consumer.consume(num_messages=args.batch_size, timeout=0.1)
                if not messages:
                    continue
                totals = {}
                for message in messages:
                    if message.error():
                        raise KafkaException(message.error())
                    consumed += 1
                    try:
                        event = json.loads(message.value())
                    except ValueError:
                        continue
                    if event.get("op") != "incr":
                        continue
                    by = int(event.get("by", 1))
                    labels = event["path"].split(".")
                    for depth in range(1, len(labels) + 1):
                        key = (event["user"], ".".join(labels[:depth]))
                        totals[key] = totals.get(key, 0) + by
                    applied += 1
                keys = sorted(totals)
                with connection.transaction():
                    connection.execute(UPSERT, ([k[0] for k in keys], [k[1] for k in keys], [totals[k] for k in keys]))
                consumer.commit(asynchronous=False)
                batches += 1
                if first_commit is None:
                    first_commit = time.monotonic()
        finally:
            consumer.close()
        done = time.monotonic()
        print(json.dumps({
            "consumed": consumed, "applied": applied, "batches": batches,
            "seconds": round(done - started, 3),
            "seconds_from_first_commit": round(done - (first_commit or done), 3),
        }), flush=True)
        return 0


if __name__ == "__main__":
    sys.exit(main())
