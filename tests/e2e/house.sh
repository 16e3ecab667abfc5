#!/usr/bin/env bash
# house.sh — the house's rules, checked over the sources:
#  - the layering (docs/architecture.md), over the #include lines by
#    tools/check_layers.py: api -> daemon -> engine (cluster a backend
#    beside the engine), no arrow back, clients apart, and api/ calling no
#    spmv_gpu_* function;
#  - no function outside tests over 80 lines (tools/check_functions.py).
# Each checker is first shown to fail on a small tree with a planted
# violation, so a pass on the real tree means something.
. "$(dirname "$0")/lib.sh"

CHECK="$PYTHON $SPMV_ROOT/tools/check_layers.py"

# plant DIR: a tree with one good file per layer
plant() {
  local t=$1
  mkdir -p "$t"/{api,daemon,engine/gpu,cluster,clients,tools}
  printf '#include "daemon/daemon.h"\n#include "spmv.h"\n' >"$t/api/ok.c"
  printf '#include "spmv.h"\n#include "cluster/cluster.h"\n' >"$t/daemon/daemon.h"
  printf '#include "spmv.h"\n' >"$t/cluster/cluster.h"
  printf '#include "gpu.cuh"\n' >"$t/engine/gpu/k.cu"
  printf '#include "spmv.h"\n' >"$t/engine/gpu/gpu.cuh"
  printf '/* engine */\n' >"$t/engine/spmv.h"
  printf '#include "spmvclient.h"\n' >"$t/clients/c.c"
  printf '/* client */\n' >"$t/clients/spmvclient.h"
}

clean=$E2E_TMP/clean
plant "$clean"
if $CHECK "$clean" >"$E2E_TMP/out" 2>&1; then ok "a tree that keeps the rule passes"
else not_ok "a tree that keeps the rule passes" "$(cat "$E2E_TMP/out")"; fi

# each planted fault alone must fail, naming the file and the line
expect_violation() { # DESCRIPTION FILE CONTENT PATTERN
  local t=$E2E_TMP/bad$T_COUNT
  plant "$t"
  printf '%b' "$3" >"$t/$2"
  if $CHECK "$t" >"$E2E_TMP/out" 2>&1; then
    not_ok "$1" "the checker passed a tree with $2: $3"
  elif grep -q "$4" "$E2E_TMP/out"; then ok "$1"
  else not_ok "$1" "no line matching '$4'" "$(cat "$E2E_TMP/out")"; fi
}
expect_violation "daemon/ including api/ fails" daemon/bad.c '#include "api/ok.c"\n' 'daemon/bad.c:1: includes api/ok.c'
expect_violation "engine/ including daemon/ fails" engine/bad.c '/* x */\n#include "daemon/daemon.h"\n' 'engine/bad.c:2: includes daemon/daemon.h'
expect_violation "cluster/ including daemon/ fails" cluster/bad.c '#include "daemon/daemon.h"\n' 'cluster/bad.c:1'
expect_violation "clients/ including the engine fails" clients/bad.c '#include "engine/spmv.h"\n' 'clients/bad.c:1'
expect_violation "api/ calling spmv_gpu_* fails" api/bad.c 'void f(void) { spmv_gpu_matrix_bytes(0); }\n' 'api/bad.c:1: calls spmv_gpu_matrix_bytes'
expect_violation "engine/ including cluster/ fails" engine/gpu/bad.cu '#include "cluster/cluster.h"\n' 'engine/gpu/bad.cu:1'

# a call named in a comment is no call
t=$E2E_TMP/comment
plant "$t"
printf '/* spmv_gpu_matrix_bytes(m) is the daemon'"'"'s to call */\n' >"$t/api/c.c"
if $CHECK "$t" >"$E2E_TMP/out" 2>&1; then ok "a spmv_gpu_* name in an api/ comment is not a call"
else not_ok "a spmv_gpu_* name in an api/ comment is not a call" "$(cat "$E2E_TMP/out")"; fi

# the project itself
if $CHECK "$SPMV_ROOT" >"$E2E_TMP/out" 2>&1; then ok "spmvd's tree keeps the layering ($(tail -1 "$E2E_TMP/out"))"
else not_ok "spmvd's tree keeps the layering" "$(cat "$E2E_TMP/out")"; fi

# ------------------------------------------------------ function length
FUNCS="$PYTHON $SPMV_ROOT/tools/check_functions.py"
t=$E2E_TMP/funcs
mkdir -p "$t/engine" "$t/api"
{ printf 'static int short_one(int a)\n{\n'; for i in $(seq 80); do printf '    a += %d;\n' "$i"; done; printf '    return a;\n}\n'; } >"$t/engine/ok.c"
if $FUNCS "$t" >"$E2E_TMP/out" 2>&1; then not_ok "a function of 81 lines fails" "passed: $(cat "$E2E_TMP/out")"
elif grep -q 'engine/ok.c:1: short_one is 81 lines' "$E2E_TMP/out"; then ok "a function of 81 lines fails, named with its line"
else not_ok "a function of 81 lines fails, named with its line" "$(cat "$E2E_TMP/out")"; fi
{ printf 'int f(int a)\n{\n'; for i in $(seq 80); do printf '    a += %d;\n' "$i"; done; printf '}\n'; } >"$t/engine/ok.c"
if $FUNCS "$t" >"$E2E_TMP/out" 2>&1; then ok "a function of 80 lines passes"
else not_ok "a function of 80 lines passes" "$(cat "$E2E_TMP/out")"; fi
if $FUNCS "$SPMV_ROOT" >"$E2E_TMP/out" 2>&1; then ok "no function of spmvd outside tests is over 80 lines ($(tail -1 "$E2E_TMP/out"))"
else not_ok "no function of spmvd outside tests is over 80 lines" "$(cat "$E2E_TMP/out")"; fi

done_testing
