#!/usr/bin/env bash
# A throw-away CA and a certificate for 127.0.0.1 signed by it, for the webhook receiver of
# the guides (config/demo.toml trusts var/demo/ca.pem). `make demo` runs it; it does nothing
# when the files exist. Usage: docs/examples/demo_certs.sh [DIRECTORY] (default var/demo).
set -euo pipefail
dir=${1:-var/demo}
mkdir -p "$dir"
if [ -f "$dir/ca.pem" ] && [ -f "$dir/receiver.pem" ] && [ -f "$dir/receiver.key" ]; then exit 0; fi
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 365 \
  -subj '/CN=volthub demo CA' -keyout "$dir/ca.key" -out "$dir/ca.pem" \
  -addext 'basicConstraints=critical,CA:TRUE' -addext 'keyUsage=critical,keyCertSign,cRLSign' 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -subj '/CN=127.0.0.1' -keyout "$dir/receiver.key" -out "$dir/receiver.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > "$dir/receiver.ext"
openssl x509 -req -in "$dir/receiver.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
  -CAcreateserial -days 365 -extfile "$dir/receiver.ext" -out "$dir/receiver.pem" 2>/dev/null
echo "made a demo CA ($dir/ca.pem) and a certificate for 127.0.0.1 ($dir/receiver.pem)"
