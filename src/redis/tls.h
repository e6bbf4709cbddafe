/* TLS for the connections (rediss://): the client's SSL_CTX, made once from
 * its settings, and an SSL per connection that verifies the server's
 * certificate and its name (hiredis_ssl checks no name), handed to hiredis.
 *
 * Every function exists in a build without TLS too: there relock__tls_new
 * refuses a TLS setting and the others are never reached. */
#ifndef RELOCK__REDIS_TLS_H
#define RELOCK__REDIS_TLS_H

#include <stddef.h>

#include <relock/error.h>

#include "config/settings.h"

struct redisContext;
struct ssl_st;

typedef struct relock__tls relock__tls_t;

/* The TLS context for s: *out stays NULL when s does not ask for TLS.
 * 0, or RELOCK_ETLS (a CA, certificate or key that cannot be loaded; no
 * TLS in this build) or RELOCK_ENOMEM, with err naming the problem. */
int relock__tls_new(const relock__settings_t *s, relock__tls_t **out, relock_error_t *err);

void relock__tls_free(relock__tls_t *t);

/* Starts TLS on ctx, a hiredis context whose TCP connect has completed:
 * a new SSL for the server's name (tls-server-name, else host: the name or
 * address connected to), handed to hiredis, which owns it from then on and
 * frees it with the context. The handshake itself goes on as hiredis reads
 * and writes. The SSL sends with MSG_NOSIGNAL: once this returns, no read
 * or write of the connection raises SIGPIPE (this call itself may: the
 * handshake's first write). The SSL, or NULL with msg saying why. */
struct ssl_st *relock__tls_start(relock__tls_t *t, struct redisContext *ctx, const char *host, char *msg,
                                 size_t size);

/* Why TLS failed on ssl, if it did: the certificate's verification result
 * (X509_verify_cert_error_string: "certificate has expired"), OpenSSL's
 * reason ("tlsv13 alert certificate required"), or an unfinished
 * handshake. 1 with msg filled, or 0 when TLS is not to blame (a closed
 * connection after the handshake). Clears the thread's OpenSSL error queue
 * either way. */
int relock__tls_failure(struct ssl_st *ssl, char *msg, size_t size);

/* Whether ssl finished its handshake. */
int relock__tls_established(struct ssl_st *ssl);

/* Bytes ssl has decrypted and not yet handed out (they will raise no
 * readiness on the socket). */
int relock__tls_pending(struct ssl_st *ssl);

#endif /* RELOCK__REDIS_TLS_H */
