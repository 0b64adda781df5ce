#!/usr/bin/env bash
# Make a private CA and certificates for the Dask scheduler, workers and clients (dkernel).
#   deploy/tls/make-certs.sh OUTDIR [SCHEDULER_HOSTNAME ...]
# Writes OUTDIR/{ca,scheduler,worker,client}.{pem,key}; keep the *.key files private.
set -euo pipefail

out="${1:?usage: make-certs.sh OUTDIR [HOSTNAME ...]}"
shift || true
hosts=("localhost" "127.0.0.1" "$@")
days="${DKERNEL_CERT_DAYS:-365}"
mkdir -p "$out"
umask 077

openssl req -x509 -newkey rsa:2048 -nodes -days "$days" \
    -subj "/CN=dkernel-dask-ca" -keyout "$out/ca.key" -out "$out/ca.pem" 2>/dev/null

san=""
for h in "${hosts[@]}"; do
    if [[ "$h" =~ ^[0-9.]+$ ]]; then san+="IP:$h,"; else san+="DNS:$h,"; fi
done
san="${san%,}"

for name in scheduler worker client; do
    openssl req -newkey rsa:2048 -nodes -subj "/CN=dkernel-$name" \
        -keyout "$out/$name.key" -out "$out/$name.csr" 2>/dev/null
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$san" > "$out/$name.ext"
    openssl x509 -req -in "$out/$name.csr" -CA "$out/ca.pem" -CAkey "$out/ca.key" \
        -CAcreateserial -days "$days" -extfile "$out/$name.ext" -out "$out/$name.pem" 2>/dev/null
    rm -f "$out/$name.csr" "$out/$name.ext"
done
chmod 600 "$out"/*.key
chmod 644 "$out"/*.pem
echo "certificates in $out: ca.pem, scheduler.{pem,key}, worker.{pem,key}, client.{pem,key}"
