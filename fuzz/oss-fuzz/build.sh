#!/bin/bash -eu
# OSS-Fuzz build script (projects/arrowcert/build.sh). Builds the four
# targets with the sanitizer OSS-Fuzz asks for, the reference plugins the
# plugin targets load, and a seed corpus per target from the bundled
# scenarios and the gold files.
cd "$SRC/arrowcert"
cargo build --release -p arrowcert -p arrowcert-producer-reference -p arrowcert-consumer-reference
cargo fuzz build --fuzz-dir fuzz -O
for t in validate consumer producer async; do
    cp "fuzz/target/x86_64-unknown-linux-gnu/release/$t" "$OUT/arrowcert_$t"
done
# The plugin targets take ARROWCERT_FUZZ_PRODUCER / ARROWCERT_FUZZ_CONSUMER,
# and without them the reference plugins beside the binary: so they go
# into $OUT too.
cp target/release/libarrowcert_producer_reference.so target/release/libarrowcert_consumer_reference.so "$OUT/"
gold=""
[ -d ../shared/gold/cpp-21.0.0 ] && gold="--gold ../shared/gold/cpp-21.0.0"
target/release/arrowcert fuzz-corpus --out /tmp/seeds $gold --generated 32
for t in validate consumer producer async; do
    (cd "/tmp/seeds/$t" && zip -q "$OUT/arrowcert_${t}_seed_corpus.zip" ./*)
done
