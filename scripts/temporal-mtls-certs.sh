#!/usr/bin/env bash
# Certificates for mutual TLS between the compose services and Temporal (docker-compose.mtls.yml):
# a CA, the Temporal server's certificate (DNS name "temporal", also its client certificate between its
# own services) and the services' client certificate, written to DIR (default ./certs/temporal):
#   DIR/ca.key               the CA's key: never mounted; keep it offline in production
#   DIR/server/{ca.crt,server.crt,server.key}    mounted into the temporal service only
#   DIR/client/{ca.crt,client.crt,client.key}    mounted into api, worker, temporal-setup, temporal-ui
# `--client-only` issues a new client certificate with the existing CA (rotation): the files are
# replaced by rename, and the running API and worker switch to them without a restart.
# Keys are mode 0644: the Temporal and service images run as their own users; isolation is by mount.
set -euo pipefail
client_only=false
dir=./certs/temporal
for arg in "$@"; do
  case "$arg" in
    --client-only) client_only=true ;;
    -*) echo "usage: $0 [DIR] [--client-only]" >&2; exit 2 ;;
    *) dir="$arg" ;;
  esac
done
days="${CERT_DAYS:-365}"
mkdir -p "$dir/server" "$dir/client"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

if [ "$client_only" = false ]; then
  openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/ca.key"
  openssl req -x509 -new -key "$tmp/ca.key" -sha256 -days 3650 -subj "/CN=video-voice-api Temporal CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" -out "$tmp/ca.crt"
  install -m 0600 "$tmp/ca.key" "$dir/ca.key"
  install -m 0644 "$tmp/ca.crt" "$dir/ca.crt"
fi
[ -f "$dir/ca.key" ] || { echo "$0: no CA in $dir (run without --client-only first)" >&2; exit 1; }

# leaf NAME CN EXTENDED_KEY_USAGE [SAN]: a key and a certificate signed by the CA, in $tmp.
leaf() {
  local name="$1" cn="$2" eku="$3" san="${4:-}"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [ -n "$san" ] && echo "subjectAltName=$san"
  } > "$tmp/$name.ext"
  openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt -out "$tmp/$name.key"
  openssl req -new -key "$tmp/$name.key" -subj "/CN=$cn" -out "$tmp/$name.csr"
  openssl x509 -req -in "$tmp/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days "$days" -sha256 \
    -extfile "$tmp/$name.ext" -out "$tmp/$name.crt" 2>/dev/null
}

# Replaces DEST by rename (a watcher never sees a half-written file).
put() {
  install -m 0644 "$1" "$2.new"
  mv -f "$2.new" "$2"
}

if [ "$client_only" = false ]; then
  leaf server temporal "serverAuth,clientAuth" "DNS:temporal,DNS:localhost,IP:127.0.0.1"
  put "$dir/ca.crt" "$dir/server/ca.crt"
  put "$tmp/server.key" "$dir/server/server.key"
  put "$tmp/server.crt" "$dir/server/server.crt"
  put "$dir/ca.crt" "$dir/client/ca.crt"
fi
leaf client "video-voice-api-$(date -u +%Y%m%dT%H%M%SZ)" clientAuth
# The key first, then the certificate: the service re-reads both once the certificate changes.
put "$tmp/client.key" "$dir/client/client.key"
put "$tmp/client.crt" "$dir/client/client.crt"
echo "$dir"
