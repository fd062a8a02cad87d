# A controller in shell, driven by a watch, that writes with server-side apply: curl
# watches my-config alone (the kubeconfig's server; its CA and token when it has them —
# the grader's names its proxy over plain HTTP, which adds the token), its state first
# (sendInitialEvents: ADDED when it is there, then a bookmark that ends the state);
# when my-config is absent from that state, is deleted, or an event's data is not the
# desired data, it applies my-config (a PATCH, application/apply-patch+yaml,
# fieldManager applies-server-side, force) and prints the answer's code. It reads
# my-config no other way and never writes when its data is right; a watch the server
# ends is started again; SIGINT or SIGTERM end it with exit 0.
# xtask/tests/grade.rs grades it: under the course's Role (no patch) each apply is
# answered 403; with a Role that allows patch (role-with-patch.yaml) it graduates.
#
# The watch runs in the foreground, not in the background: sh starts a background
# command with SIGINT ignored (dash's cannot be given it back), so a Ctrl-C, or the
# grader's SIGINT to the whole group, would leave that curl running. In the
# foreground each process of the group dies of the signal, and the trap exits 0.
set -u
. "$(dirname "$0")/curl-config.sh"
trap 'rm -f "$ca" "$cfg"; exit 0' INT TERM

# my-config alone, its state first, then what happens to it (sendInitialEvents asks
# for resourceVersionMatch=NotOlderThan and bookmarks).
watch="$url?watch=true&fieldSelector=metadata.name%3Dmy-config"
watch="$watch&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"

# One line of the watch, in a word: right or wrong (an event's data against the
# desired), deleted, end (the bookmark that ends the state), other (a bookmark, a line
# of a refusal's Status, which the API server prints over many lines); an error, said.
judge='
  (fromjson? | objects) // {} |
  if .type == "ADDED" or .type == "MODIFIED" then
    if (.object.data // {}) == $want then "right" else "wrong" end
  elif .type == "DELETED" then "deleted"
  elif .type == "BOOKMARK" then
    if .object.metadata.annotations["k8s.io/initial-events-end"] == "true" then "end" else "other" end
  elif .type == "ERROR" then "ERROR \(.object.code): \(.object.message)"
  else "other" end'

apply() {
  echo "$1: applying it"
  jq -n --argjson data "$desired" \
    '{apiVersion: "v1", kind: "ConfigMap", metadata: {name: "my-config", namespace: "default"}, data: $data}' |
    curl -sS -K "$cfg" -o /dev/null -w 'apply: HTTP %{http_code}\n' -X PATCH \
      -H 'Content-Type: application/apply-patch+yaml' --data-binary @- \
      "$url/my-config?fieldManager=applies-server-side&force=true"
}

while :; do
  curl -sS -N -K "$cfg" -w '%{stderr}the watch ended: HTTP %{http_code}\n' "$watch" | {
    seen=no # my-config was in this watch's state
    while IFS= read -r event; do
      what=$(printf '%s\n' "$event" | jq -R -r --argjson want "$desired" "$judge")
      case $what in
      right) seen=yes ;;
      wrong) seen=yes && apply "my-config differs" ;;
      deleted) seen=no && apply "my-config was deleted" ;;
      end) [ "$seen" = yes ] || apply "my-config is absent" ;;
      other | '') ;;
      *) echo "watch: $what" ;;
      esac
    done
  }
  sleep 1
done
