# Sourced by the scripts of .ci/: `run CMD ARGS...` prints the command as a person would type
# it (quoted where the shell needs it), on stderr after "+ ", then runs it.
run() {
  local word line=""
  for word in "$@"; do
    if [[ "$word" =~ ^[A-Za-z0-9_./:=@,+-]+$ ]]; then
      line+=" $word"
    elif [[ "$word" != *"'"* ]]; then
      line+=" '$word'"
    else
      line+=" $(printf '%q' "$word")"
    fi
  done
  echo "+${line}" >&2
  "$@"
}
