#!/usr/bin/env bash
# bench-upload.sh — upload-to-resident of a large .npz against reading its bytes (issue 13).
#
#   bash tools/bench-upload.sh [--nnz N] [--device cpu|gpu] [--spmvd PATH] [--gen PATH] [--dir DIR]
#
# Generates a uniform matrix of about N non-zeros (16 a row) with
# spmv-gen --npz=stored (the binary upload, members not compressed) and its
# Matrix Market twin for comparison, then, on a fresh spmvd:
#   read    the file's bytes read once more after a first read (page cache
#           warm: the floor for any consumer of the file), `cat > /dev/null`;
#   upload  curl -T to 201 Created with device=$DEVICE: the body spooled,
#           read by libzip straight into the host CSR (a CSR archive with
#           sorted rows: this one), then the matrix file written (fsync'd),
#           on device=gpu while the CSR is copied to the GPU;
#   mtx     the same matrix as Matrix Market text, for comparison.
# Prints a table (seconds, GB/s, ratio to read) and the descriptor's timing
# split. Reports, never asserts. `make bench-upload` runs it here; on the GPU
# host: bash bundle/bench-upload.sh --nnz 1000000000 --device gpu.
set -euo pipefail
NNZ=10000000 DEVICE=cpu DIR=${TMPDIR:-/tmp}/spmvd-bench-upload
B=$(cd "$(dirname "$0")/.." && pwd)
SPMVD=$B/build/spmvd GEN=$B/build/spmv-gen
while [ $# -gt 0 ]; do
  case $1 in
    --nnz) NNZ=$2; shift 2 ;; --device) DEVICE=$2; shift 2 ;; --dir) DIR=$2; shift 2 ;;
    --spmvd) SPMVD=$2; shift 2 ;; --gen) GEN=$2; shift 2 ;;
    *) echo "usage: $0 [--nnz N] [--device cpu|gpu] [--spmvd PATH] [--gen PATH] [--dir DIR]" >&2; exit 2 ;;
  esac
done
rm -rf "$DIR"; mkdir -p "$DIR/state"
ROWS=$((NNZ / 16))
now() { date +%s.%N; }
sub() { python3 -c "print($1 - $2)"; }
t0=$(now); "$GEN" --kind uniform --n "$ROWS" --per-row 16 --npz=stored --out "$DIR/m.npz" >/dev/null; t1=$(now)
echo "generated $(du -h "$DIR/m.npz" | cut -f1) .npz ($ROWS rows, 16 a row) in $(sub "$t1" "$t0") s"
MTX=1; [ "$NNZ" -gt 200000000 ] && MTX=0  # the text twin of a billion entries would not fit the disk
[ $MTX = 1 ] && "$GEN" --kind uniform --n "$ROWS" --per-row 16 --out "$DIR/m.mtx" >/dev/null
PORT=$((20000 + RANDOM % 20000))
"$SPMVD" --listen "127.0.0.1:$PORT" --state-dir "$DIR/state" --max-upload-bytes 64T --max-body-bytes 64G \
  --devices "$([ "$DEVICE" = gpu ] && echo all || echo none)" >"$DIR/spmvd.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DIR"' EXIT
for _ in $(seq 200); do curl -sf "http://127.0.0.1:$PORT/v1/ready" >/dev/null && break; sleep 0.1; done
bytes=$(stat -c %s "$DIR/m.npz")
# from disk: O_DIRECT bypasses the page cache; then warm (page cache)
t0=$(now); dd if="$DIR/m.npz" of=/dev/null bs=16M iflag=direct status=none 2>/dev/null || cat "$DIR/m.npz" >/dev/null
t1=$(now); disk_s=$(sub "$t1" "$t0")
cat "$DIR/m.npz" >/dev/null
t0=$(now); cat "$DIR/m.npz" >/dev/null; t1=$(now); read_s=$(sub "$t1" "$t0")
upload() { # file -> seconds; the descriptor in $DIR/desc.json
  local t0 t1 code
  t0=$(now)
  code=$(curl -s -o "$DIR/desc.json" -w '%{http_code}' -X POST -H 'Content-Type: application/octet-stream' -T "$1" \
    "http://127.0.0.1:$PORT/v1/matrices?device=$DEVICE")  # -T streams the file (--data-binary would load it whole)
  t1=$(now)
  [ "$code" = 201 ] || { echo "upload of $1: HTTP $code $(head -c 300 "$DIR/desc.json")" >&2; exit 1; }
  sub "$t1" "$t0"
}
up_s=$(upload "$DIR/m.npz"); cp "$DIR/desc.json" "$DIR/npz.json"
row() { python3 -c 'import sys; w, b, s, d = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]); print("| %s | %d | %.3f | %.2f | %.2f |" % (w, b, s, b / s / 1e9, s / d))' "$@"; }
printf '\n| what | bytes | seconds | GB/s | / read from disk |\n|---|---:|---:|---:|---:|\n'
row "read the .npz from disk (O_DIRECT)" "$bytes" "$disk_s" "$disk_s"
row "read the .npz again (page cache)" "$bytes" "$read_s" "$disk_s"
row "upload the .npz to resident ($DEVICE)" "$bytes" "$up_s" "$disk_s"
if [ $MTX = 1 ]; then
  mbytes=$(stat -c %s "$DIR/m.mtx"); mt_s=$(upload "$DIR/m.mtx")
  row "upload the same as Matrix Market ($DEVICE)" "$mbytes" "$mt_s" "$disk_s"
fi
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print("\nnnz", d["nnz"], "device", d["device"], "timings (ms)", d["timings"])' "$DIR/npz.json"
grep -o 'upload: .npz.*' "$DIR/spmvd.log" | head -1  # which way the reader took
