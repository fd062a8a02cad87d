# Not a controller: lists default's ConfigMaps through the grader's proxy three
# ways and writes the three HTTP codes to $1 — as another process on the
# machine would (the proxy's address, not its secret path), as a web page would
# (the secret path, another Host), as the program does (its kubeconfig's
# server) — then exits.
# xtask/tests/grade.rs grades it: only the program's request is answered.
set -u
server=$(awk '$1 == "server:" { gsub(/"/, "", $2); print $2; exit }' "$KUBECONFIG")
address=$(printf %s "$server" | cut -d/ -f1-3)
path=/api/v1/namespaces/default/configmaps
code() {
  curl -sS -o /dev/null -w '%{http_code}' "$@"
}
echo "$(code "$address$path") $(code -H 'Host: lab.example' "$server$path") $(code "$server$path")" >"$1"
