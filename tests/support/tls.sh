#!/bin/sh
# Certificates for the TLS tests, made with the openssl CLI into DIR:
#   ca.crt ca.key              the test CA
#   server.crt server.key      for localhost and 127.0.0.1, from the CA
#   client.crt client.key      a client certificate from the CA (mutual TLS)
#   node.crt node.key          like server.crt, good as a client's too: a server that
#                              is its peers' TLS client (a cluster node before 6.2)
#   expired.crt expired.key    like server.crt, expired a day ago
#   other.crt other.key        from the CA, for other.example and 10.9.9.9 only
#   other-ca.crt other-ca.key  a second CA that signed none of the above
# EC keys (P-256): quick to make. Everything but the CA lives a day or two.
#
#   tests/support/tls.sh DIR
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
command -v openssl >/dev/null || { echo "tls.sh: needs openssl (Debian: apt-get install openssl)" >&2; exit 1; }
mkdir -p "$1"
cd "$1"

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }

ca() { # NAME CN
  key "$1"
  openssl req -x509 -new -key "$1.key" -out "$1.crt" -days 2 -subj "/CN=$2" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
}

leaf() { # NAME DAYS SAN USAGE
  key "$1"
  openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$1"
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\nbasicConstraints=CA:FALSE\n' "$3" "$4" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days "$2" \
    -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

ca ca "relock test CA"
ca other-ca "another CA"
leaf server 1 "DNS:localhost,IP:127.0.0.1,IP:::1" serverAuth
leaf client 1 "DNS:relock-test-client" clientAuth
leaf node 1 "DNS:localhost,IP:127.0.0.1,IP:::1" serverAuth,clientAuth
leaf expired -1 "DNS:localhost,IP:127.0.0.1" serverAuth
leaf other 1 "DNS:other.example,IP:10.9.9.9" serverAuth
chmod 600 ./*.key
