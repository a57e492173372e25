# Helpers for the docs' shell examples. Source it in the terminal you paste them into
# (bash, from the repository root): `source docs/examples/tour.sh`. It needs curl and python3.
#
#   json_get KEY...        one field of the JSON document on stdin (list indexes are numbers)
#   wait_for FILE TEXT     wait up to 60 s for TEXT in FILE (the output of a background program)
#   sign_in NAME PASSWORD  register NAME if it is new, sign in, print a first-party token
#   new_app NAME [SCOPE]   the developer app NAME of $TOKEN's user (created once): sets CLIENT_ID,
#                          CLIENT_SECRET and REDIRECT_URI; an operator grants SCOPE (sensitive scopes)
#   wait_port PORT         wait up to 60 s until something listens on 127.0.0.1:PORT
#   authorize SCOPES       the OAuth code flow with PKCE for $CLIENT_ID, consented by $TOKEN's
#                          user: prints an access token carrying SCOPES
BASE=${BASE:-http://127.0.0.1:8080}   # where `make serve` / `make demo` listens
mkdir -p var/demo                      # scratch files of the examples (var/ is git-ignored)

json_get() {
  python3 -c 'import json, sys
value = json.load(sys.stdin)
for key in sys.argv[1:]:
    value = value[int(key)] if isinstance(value, list) else value[key]
print(value if not isinstance(value, (dict, list)) else json.dumps(value))' "$@"
}

wait_for() {
  # Generous: on a busy machine a background program can take seconds to say its first line.
  for _ in $(seq 600); do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "gave up waiting for '$2' in $1:" >&2; cat "$1" >&2; return 1
}

sign_in() {
  local body="{\"username\": \"$1\", \"password\": \"$2\"}"
  curl -s -o /dev/null -X POST "$BASE/api/auth/register" -H 'Content-Type: application/json' -d "$body"
  curl -sf -X POST "$BASE/api/auth/login" -H 'Content-Type: application/json' -d "$body" | json_get token
}

new_app() {
  REDIRECT_URI=http://127.0.0.1:9000/callback
  local app
  app=$(curl -sf "$BASE/api/developer/apps" -H "Authorization: Bearer $TOKEN" | python3 -c 'import json, sys
found = [app for app in json.load(sys.stdin)["items"] if app["name"] == sys.argv[1]]
print(json.dumps(found[0]) if found else "")' "$1")
  if [ -z "$app" ]; then
    app=$(curl -sf -X POST "$BASE/api/developer/apps" -H "Authorization: Bearer $TOKEN" \
      -H 'Content-Type: application/json' -d "{\"name\": \"$1\", \"redirectUris\": [\"$REDIRECT_URI\"]}")
    echo "$app" | json_get clientSecret > "var/demo/app-$(echo "$app" | json_get clientId).secret"
  fi
  CLIENT_ID=$(echo "$app" | json_get clientId)
  CLIENT_SECRET=$(cat "var/demo/app-$CLIENT_ID.secret")
  if [ $# -gt 1 ]; then .venv/bin/volthub apps grant "$CLIENT_ID" "${@:2}" > /dev/null; fi
}

authorize() {
  local verifier challenge code
  verifier=$(python3 -c 'import secrets; print(secrets.token_urlsafe(48))')
  challenge=$(printf '%s' "$verifier" | python3 -c 'import base64, hashlib, sys
print(base64.urlsafe_b64encode(hashlib.sha256(sys.stdin.buffer.read()).digest()).rstrip(b"=").decode())')
  code=$(curl -sf -X POST "$BASE/api/developer/oauth/authorize" -H "Authorization: Bearer $TOKEN" \
    -H 'Content-Type: application/json' -d "{\"response_type\": \"code\", \"client_id\": \"$CLIENT_ID\",
      \"redirect_uri\": \"$REDIRECT_URI\", \"scope\": \"$1\", \"state\": \"tour\", \"approve\": true,
      \"code_challenge\": \"$challenge\", \"code_challenge_method\": \"S256\"}" | json_get code)
  curl -sf -X POST "$BASE/api/developer/oauth/token" -u "$CLIENT_ID:$CLIENT_SECRET" \
    --data-urlencode grant_type=authorization_code --data-urlencode "code=$code" \
    --data-urlencode "redirect_uri=$REDIRECT_URI" --data-urlencode "code_verifier=$verifier" | json_get access_token
}

wait_port() {
  for _ in $(seq 600); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "nothing listens on 127.0.0.1:$1" >&2; return 1
}
