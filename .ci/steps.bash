# Steps of .ci/test (sourced by it; tests/ci_setup.rs runs it with steps of its own). Rules:
# - Every step runs, even after one failed: a red step never hides the ones after it.
# - Each step's start is a line `== [SECONDS] NAME` (seconds since the run began), so a slow run
#   shows where its time went; each step's own output (cargo test's summaries) is left as it is.
# - The run ends with a summary: every step with its time and result, the failed ones named again
#   last, and the exit status is 1 when any step failed.
started=$SECONDS
steps_done=() steps_failed=()

step() { printf '\n== [%ss] %s\n' "$((SECONDS - started))" "$*"; }

# run NAME COMMAND...: runs COMMAND as the step NAME, and records how it ended.
run() {
  local name=$1 began=$SECONDS status=0
  shift
  step "$name"
  "$@" || status=$?
  local took=$((SECONDS - began))
  if [ "$status" -eq 0 ]; then
    steps_done+=("ok      ${took}s  $name")
  else
    steps_done+=("FAILED  ${took}s  $name (exit $status)")
    steps_failed+=("$name (exit $status)")
  fi
  return 0
}

# summary: the table of steps, then the failed ones; returns 1 when any failed.
summary() {
  step "summary"
  printf '%s\n' "${steps_done[@]}"
  if [ ${#steps_failed[@]} -eq 0 ]; then
    printf '\nevery step passed in %ss\n' "$((SECONDS - started))"
    return 0
  fi
  printf '\n%s of %s steps failed (scroll up to each `== [..] NAME` line for its output):\n' "${#steps_failed[@]}" "${#steps_done[@]}"
  printf '  %s\n' "${steps_failed[@]}"
  return 1
}
