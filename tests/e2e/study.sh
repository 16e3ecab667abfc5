#!/usr/bin/env bash
# study.sh — `spmvctl study` and `python3 -m spmvd.study`, the collection study (issue 31).
#
# A small folder: three of the shared real matrices (G51 has >= 10 k non-zeros
# and an ELL past max_padding, so cpu.ell.omp is refused on it by a daemon
# with padding_allowance_bytes 0), a Matrix
# Market file with an index out of range, a link to a file that is not there,
# and a text file. spmvctl study runs three CPU kernels on it; the suite
# checks that every matrix is in the report, the broken files with their
# errors, the refused kernel with the daemon's reason, that cpu.csr.serial's
# speedup is 1, that the bench ran at the mean with its thread sweep (the
# "threads" rows carry the bench's efficiency against cpu.csr.serial, the
# header the load average), that every number of the speedup, win, GB/s,
# GFLOP/s and Threads tables is what results.csv gives (study_check.py, which
# is shown to fail on a changed number), that what was uploaded is deleted, that unknown or
# foreign options are refused, --max-nnz, and that the Python package renders
# the same report.md and results.csv from spmvctl's results.json and the other
# way round. Then the whole shared real folder with every CPU kernel, as CI's
# bound on the study's time (reported, not asserted), and --plot's PNGs.
. "$(dirname "$0")/lib.sh"

SPMVCTL=$BUILD_DIR/spmvctl
CHECK=$SPMV_ROOT/tests/e2e/study_check.py
export PYTHONPATH="$SPMV_ROOT/clients/python${PYTHONPATH:+:$PYTHONPATH}" MPLBACKEND=Agg PYTHONDONTWRITEBYTECODE=1
export SPMVD_PYTHON=$PYTHON
REAL=$MATRICES/real
[ -x "$SPMVCTL" ] || { not_ok "no spmvctl at $SPMVCTL"; done_testing; exit; }
[ -f "$REAL/G51.mtx" ] || { not_ok "no shared matrices in $REAL (set MATRICES)"; done_testing; exit; }
# padding_allowance_bytes 0: the padding rule alone decides, so G51's ELL is refused as the study must show
start_spmvd --padding-allowance-bytes 0 || { not_ok "spmvd did not start" "$(tail -5 "$SPMVD_LOG")"; done_testing; exit; }
ctl() { "$SPMVCTL" --url "$SPMVD_URL" "$@"; }

DIR=$E2E_TMP/mats
mkdir -p "$DIR"
cp "$REAL/karate.mtx" "$REAL/west0067.mtx" "$REAL/G51.mtx" "$DIR/"
printf '%%%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n9 9 2.0\n' >"$DIR/bad.mtx"
ln -s "$E2E_TMP/nothing-here.mtx" "$DIR/gone.mtx"
echo "not a matrix" >"$DIR/notes.txt"
K=cpu.csr.serial,cpu.csr.omp,cpu.ell.omp
OUT=$E2E_TMP/c

# ------------------------------------------------------------ spmvctl study
ctl study "$DIR" --kernels "$K" --runs 2 --warmup 1 --out "$OUT" >"$E2E_TMP/study.out" 2>&1
rc=$?
that "spmvctl study exits 0 (rc $rc)" "[ $rc -eq 0 ]"
[ $rc -eq 0 ] || sed 's/^/#   /' "$E2E_TMP/study.out" | tail -5
for f in report.md results.csv results.json; do that "spmvctl study writes $f" "[ -s '$OUT/$f' ]"; done
for m in karate.mtx west0067.mtx G51.mtx; do
  that "$m is an ok row of the collection table" "grep -q '^| $m | [0-9]* | [0-9]* | [1-9][0-9]* | ok |$' '$OUT/report.md'"
done
that "bad.mtx is listed with the daemon's error" \
  "grep -q '^| bad.mtx | 0 | 0 | 0 | error: float32: line 4: row index 9 is out of range' '$OUT/report.md'"
that "gone.mtx (unreadable) is listed with its error" "grep -q '^| gone.mtx .*error: .*No such file or directory' '$OUT/report.md'"
that "notes.txt is listed as ignored" "grep -q '^| notes.txt .*ignored: not a matrix file' '$OUT/report.md'"
that "cpu.ell.omp refused on G51 is listed with the padding rule" \
  "grep -q '^| G51.mtx | float64 | spmv cpu.ell.omp | threads=0 | .*max_padding' '$OUT/report.md'"
that "the header gives the load average at the start and the bench's statistic" \
  "grep -q '^- host: .* cores for the daemon, load average [0-9.]* [0-9.]* [0-9.]* (1, 5, 15 min) at the start; GPU' '$OUT/report.md' && grep -q '(bench route, \`stat\` mean, ' '$OUT/report.md'"
that "results.json says spmvd-study/2, stat mean, and every bench row's stats came at the mean" \
  "'$PYTHON' -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(not (d[\"format\"]==\"spmvd-study/2\" and d[\"options\"][\"stat\"]==\"mean\" and len(d[\"host\"][\"loadavg\"])==3))' '$OUT/results.json'"
that "the bench's sweep: cpu.csr.omp at 1 and 2 threads, efficiency = speedup / threads, both dtypes" \
  "awk -F, '\$3==\"threads\" && \$4==\"cpu.csr.omp\" && \$14!=\"\" {n++; t=substr(\$5,9); d=\$15*t/\$14-1; if (d>1e-3||d<-1e-3) bad++} END {exit !(n == 12 && !bad)}' '$OUT/results.csv'"
that "the Threads table has cpu.csr.omp at 2 threads over all 3 matrices" \
  "grep -q '^| cpu.csr.omp | 2 | 0 | [0-9.]* | [0-9.]* | [0-9.]* | 3 | [0-9.]* | [0-9.]* | [0-9.]* | 3 |$' '$OUT/report.md'"
that "cpu.ell.omp refused on G51 in the sweep too" \
  "grep -q '^| G51.mtx | float64 | threads cpu.ell.omp | threads=2 | .*max_padding' '$OUT/report.md'"
that "cpu.csr.serial's speedup is 1.00 over all 3 matrices, both dtypes" \
  "grep -q '^| cpu.csr.serial | 0 | 1.00 | 1.00 | 3 | 1.00 | 1.00 | 3 |$' '$OUT/report.md'"
that "the csv's cpu.csr.serial rows have speedup 1" \
  "awk -F, '\$3==\"spmv\" && \$4==\"cpu.csr.serial\" {n++; if (\$14 != 1) bad++} END {exit !(n == 6 && !bad)}' '$OUT/results.csv'"
that "thread sweep and SpMSpM rows are in the csv" \
  "grep -q ',threads,cpu.csr.omp,threads=2,' '$OUT/results.csv' && grep -q ',spmspm,cpu.spmspm.serial,' '$OUT/results.csv'"
"$PYTHON" "$CHECK" "$OUT" karate.mtx west0067.mtx G51.mtx >"$E2E_TMP/check.out" 2>&1
that "the report's tables equal those recomputed from results.csv" "[ $? -eq 0 ]" || sed 's/^/#   /' "$E2E_TMP/check.out"
mkdir -p "$E2E_TMP/tampered" && cp "$OUT/results.csv" "$E2E_TMP/tampered/"
sed '/^| cpu.csr.omp | 0 |/s/| [0-9]*\.[0-9][0-9] |/| 99.99 |/' "$OUT/report.md" >"$E2E_TMP/tampered/report.md"
that "study_check.py fails on a changed speedup" "! '$PYTHON' '$CHECK' '$E2E_TMP/tampered'"
# 77.77: no speedup or efficiency two threads can give (0.01 can be the real one on a loaded host)
sed '/^| cpu.csr.omp | 2 | 0 |/s/| [0-9]*\.[0-9][0-9] | [0-9]*\.[0-9][0-9] |/| 77.77 | 77.77 |/' "$OUT/report.md" >"$E2E_TMP/tampered/report.md"
that "study_check.py fails on a changed efficiency" \
  "! cmp -s '$OUT/report.md' '$E2E_TMP/tampered/report.md' && ! '$PYTHON' '$CHECK' '$E2E_TMP/tampered'"
req GET /v1/matrices
that "the study deleted every matrix it uploaded" "[ \"\$(jget 'd[\"count\"]')\" = 0 ]"

# ------------------------------------------------------------ options
for bad in "--bogus" "--store" "--x y" "--json" "--dtypes float16" "--dtypes float64,float64" "--warmup 0" \
           "--threads two" "--max-nnz 0"; do
  # shellcheck disable=SC2086
  ctl study "$DIR" $bad --out "$E2E_TMP/never" >/dev/null 2>"$E2E_TMP/err"
  that "study $bad is refused (exit 1)" "[ $? -eq 1 ] && [ ! -e '$E2E_TMP/never' ]"
done
ctl study --out "$E2E_TMP/never" >/dev/null 2>&1
that "study without a folder is refused" "[ $? -eq 1 ]"
ctl study "$DIR" --kernels cpu.csr.serial,no.such.kernel --out "$E2E_TMP/never" 2>"$E2E_TMP/err"
that "an unknown kernel is refused before any upload, named" \
  "[ $? -eq 1 ] && grep -q 'no.such.kernel' '$E2E_TMP/err' && [ ! -e '$E2E_TMP/never' ]"
ctl study "$DIR" --spmspm cpu.csr.omp --out "$E2E_TMP/never" 2>"$E2E_TMP/err"
that "an SpMV kernel in --spmspm is refused" "[ $? -eq 1 ] && grep -q 'no SpMSpM kernel' '$E2E_TMP/err'"
req GET /v1/matrices
that "refused studies uploaded nothing" "[ \"\$(jget 'd[\"count\"]')\" = 0 ]"
ctl study "$E2E_TMP/no-such-dir" --kernels cpu.csr.serial --out "$E2E_TMP/never" 2>"$E2E_TMP/err"
that "a folder that is not there is exit 6 naming it" "[ $? -eq 6 ] && grep -q 'no-such-dir' '$E2E_TMP/err'"

ctl study "$DIR" --kernels cpu.csr.serial --spmspm none --dtypes float64 --runs 1 --warmup 1 --max-nnz 1000 \
  --out "$E2E_TMP/small" >/dev/null 2>&1
that "--max-nnz 1000 lists G51 as skipped" "grep -q '^| G51.mtx | 1000 | 1000 | 11818 | skipped: nnz 11818 is over --max-nnz 1000 |$' '$E2E_TMP/small/report.md'"
that "--spmspm none: no SpMSpM section" "! grep -q '^## SpMSpM' '$E2E_TMP/small/report.md'"
that "no kernel taking threads: no Threads section, no threads rows" \
  "! grep -q '^## Threads' '$E2E_TMP/small/report.md' && ! grep -q ',threads,' '$E2E_TMP/small/results.csv'"

# ------------------------------------------------------------ both tools, one JSON
"$PYTHON" -m spmvd.study report "$OUT/results.json" --out "$E2E_TMP/c-py" >/dev/null 2>"$E2E_TMP/err"
that "spmvd.study renders spmvctl's results.json" "[ $? -eq 0 ]"
check "same report.md from spmvctl's JSON" cmp "$OUT/report.md" "$E2E_TMP/c-py/report.md"
check "same results.csv from spmvctl's JSON" cmp "$OUT/results.csv" "$E2E_TMP/c-py/results.csv"
"$PYTHON" -m spmvd.study run "$DIR" --url "$SPMVD_URL" --kernels "$K" --runs 2 --warmup 1 --no-plot \
  --out "$E2E_TMP/py" >/dev/null 2>"$E2E_TMP/err"
that "python3 -m spmvd.study run exits 0" "[ $? -eq 0 ]" || sed 's/^/#   /' "$E2E_TMP/err" | tail -5
"$PYTHON" "$CHECK" "$E2E_TMP/py" karate.mtx west0067.mtx G51.mtx >"$E2E_TMP/check.out" 2>&1
that "spmvd.study's tables equal those recomputed from its results.csv" "[ $? -eq 0 ]" || sed 's/^/#   /' "$E2E_TMP/check.out"
ctl study --from "$E2E_TMP/py/results.json" --out "$E2E_TMP/py-c" >/dev/null 2>&1
check "same report.md from spmvd.study's JSON" cmp "$E2E_TMP/py/report.md" "$E2E_TMP/py-c/report.md"
check "same results.csv from spmvd.study's JSON" cmp "$E2E_TMP/py/results.csv" "$E2E_TMP/py-c/results.csv"
echo '{"format":"something else"}' >"$E2E_TMP/other.json"
ctl study --from "$E2E_TMP/other.json" --out "$E2E_TMP/never" 2>"$E2E_TMP/err"
that "--from a JSON that is no study's is refused" "[ $? -ne 0 ] && grep -q 'spmvd-study/2' '$E2E_TMP/err'"

# ------------------------------------------------------------ the shared real folder, --plot
t0=$(date +%s.%N)
ctl study "$REAL" --runs 2 --warmup 1 --out "$E2E_TMP/real" --plot >"$E2E_TMP/real.out" 2>&1
rc=$?
secs=$(echo "$(date +%s.%N) - $t0" | bc)
diag "the shared real folder, every CPU kernel, --runs 2 --warmup 1, with --plot: ${secs} s"
that "study of the shared real folder with --plot exits 0 (rc $rc)" "[ $rc -eq 0 ]" || sed 's/^/#   /' "$E2E_TMP/real.out" | tail -5
n=$(ls "$REAL"/*.mtx | wc -l)
that "all $n matrices of the real folder studied" "[ \$(grep -c '^| [^ ]*\.mtx | .* | ok |$' '$E2E_TMP/real/report.md') -eq $n ]"
for p in matrices_gflops matrices_gbps speedup_distribution threads block_sizes hack_sizes spmspm; do
  that "$p.png is a PNG under 200 KB" \
    "[ \"\$(head -c 8 '$E2E_TMP/real/$p.png' | od -An -tx1 | tr -d ' ')\" = 89504e470d0a1a0a ] && [ \$(stat -c %s '$E2E_TMP/real/$p.png') -lt 204800 ]"
done
"$PYTHON" "$CHECK" "$E2E_TMP/real" >"$E2E_TMP/check.out" 2>&1
that "the real folder's tables equal those recomputed from results.csv" "[ $? -eq 0 ]" || sed 's/^/#   /' "$E2E_TMP/check.out"
SPMVD_PYTHON=/nonexistent/python ctl study --from "$OUT/results.json" --out "$E2E_TMP/noplot" --plot 2>"$E2E_TMP/err"
that "--plot without Python is exit 6 saying what it needs, the tables written" \
  "[ $? -eq 6 ] && grep -q 'spmvd.study plot' '$E2E_TMP/err' && [ -s '$E2E_TMP/noplot/report.md' ]"
done_testing
