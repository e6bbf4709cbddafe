/* TLS for the connections (tls.h). The SSL_CTX and each SSL are made here
 * rather than with hiredis_ssl's helpers, because those verify the
 * certificate chain but never the name in it: any certificate from a
 * trusted CA would do, for any host. */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <relock/error.h>

#include "base/error.h"
#include "redis/tls.h"

#ifdef RELOCK_HAVE_TLS

#include <arpa/inet.h>
#include <pthread.h>
#include <sys/socket.h>

#include <hiredis/hiredis.h>
#include <hiredis/hiredis_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

struct relock__tls {
  SSL_CTX *ctx;
  const relock__settings_t *settings;
};

/* OpenSSL's reason for the last error, or fallback; clears the queue. */
static const char *ssl_reason(const char *fallback) {
  unsigned long e = ERR_peek_last_error();
  const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;
  ERR_clear_error();
  return r != NULL ? r : fallback;
}

static int tls_error(relock_error_t *err, const char *what, const char *path) {
  return relock__error_set(err, RELOCK_ETLS, "TLS: cannot load %s %s: %s", what, path,
                           ssl_reason("unknown OpenSSL error"));
}

int relock__tls_new(const relock__settings_t *s, relock__tls_t **out, relock_error_t *err) {
  const struct relock_options *o = &s->opt;
  *out = NULL;
  if (!o->tls)
    return RELOCK_OK;
  relock__tls_t *t = calloc(1, sizeof(*t));
  SSL_CTX *ctx = t != NULL ? SSL_CTX_new(TLS_client_method()) : NULL;
  if (ctx == NULL) {
    free(t);
    return relock__error_set(err, RELOCK_ENOMEM, "out of memory setting up TLS");
  }
  t->ctx = ctx;
  t->settings = s;
  int r = RELOCK_OK;
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, o->tls_insecure_skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
  if (o->tls_ca_file != NULL || o->tls_ca_dir != NULL) {
    if (SSL_CTX_load_verify_locations(ctx, o->tls_ca_file, o->tls_ca_dir) != 1)
      r = o->tls_ca_file != NULL ? tls_error(err, "the CA file", o->tls_ca_file)
                                 : tls_error(err, "the CA directory", o->tls_ca_dir);
  } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
    r = relock__error_set(err, RELOCK_ETLS, "TLS: cannot load the system's CA store: %s",
                          ssl_reason("unknown OpenSSL error"));
  }
  if (r == RELOCK_OK && o->tls_cert != NULL) {
    if (SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert) != 1)
      r = tls_error(err, "the client certificate", o->tls_cert);
    else if (SSL_CTX_use_PrivateKey_file(ctx, o->tls_key, SSL_FILETYPE_PEM) != 1)
      r = tls_error(err, "the client key", o->tls_key);
    else if (SSL_CTX_check_private_key(ctx) != 1)
      r = relock__error_set(err, RELOCK_ETLS, "TLS: the client key %s does not match the certificate %s",
                            o->tls_key, o->tls_cert);
  }
  if (r != RELOCK_OK) {
    relock__tls_free(t);
    return r;
  }
  *out = t;
  return relock__error_set(err, RELOCK_OK, NULL);
}

void relock__tls_free(relock__tls_t *t) {
  if (t == NULL)
    return;
  SSL_CTX_free(t->ctx); /* each SSL holds a reference of its own */
  free(t);
}

/* The name to verify: an IP literal is checked against the certificate's
 * IP addresses and sent as no SNI (RFC 6066 allows host names only). An
 * IPv6 zone ("fe80::1%eth0") is no part of the address. */
static int set_peer_name(SSL *ssl, const char *name) {
  char ip[64];
  snprintf(ip, sizeof ip, "%s", name);
  ip[strcspn(ip, "%")] = '\0';
  unsigned char buf[16];
  if (inet_pton(AF_INET, ip, buf) == 1 || inet_pton(AF_INET6, ip, buf) == 1)
    return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip) == 1 ? 0 : -1;
  if (SSL_set_tlsext_host_name(ssl, name) != 1 || SSL_set1_host(ssl, name) != 1)
    return -1;
  /* "*.example.com" covers a.example.com, not a.b.example.com */
  SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  return 0;
}

/* -- writes without SIGPIPE ---------------------------------------------------
 * OpenSSL's socket BIO writes with write(2), which raises SIGPIPE on a
 * connection the peer has closed; SSL_read writes too (the rest of the
 * handshake, alerts, key updates). A filter in front of it sends with
 * MSG_NOSIGNAL instead and hands everything else to the socket BIO, so a
 * TLS connection needs no signal mask around its reads and writes
 * (relock__ev_no_sigpipe): two fewer syscalls per read or write. */

static BIO_METHOD *nosigpipe_method;
static pthread_once_t nosigpipe_once = PTHREAD_ONCE_INIT;

static int nosigpipe_write(BIO *b, const char *buf, int len) {
  int fd = -1;
  BIO_get_fd(BIO_next(b), &fd);
  BIO_clear_retry_flags(b);
  ssize_t n = send(fd, buf, (size_t)len, MSG_NOSIGNAL);
  if (n <= 0 && BIO_sock_should_retry((int)n))
    BIO_set_retry_write(b);
  return (int)n;
}

static int nosigpipe_read(BIO *b, char *buf, int len) {
  int n = BIO_read(BIO_next(b), buf, len);
  BIO_clear_retry_flags(b);
  BIO_copy_next_retry(b); /* EAGAIN: the socket BIO's "retry read" */
  return n;
}

/* fd, EOF (OpenSSL tells a truncated stream by it), flush: the socket's. */
static long nosigpipe_ctrl(BIO *b, int cmd, long num, void *ptr) {
  return BIO_next(b) != NULL ? BIO_ctrl(BIO_next(b), cmd, num, ptr) : 0;
}

static int nosigpipe_create(BIO *b) {
  BIO_set_init(b, 1);
  return 1;
}

static int nosigpipe_destroy(BIO *b) { return b != NULL; }

static void make_nosigpipe_method(void) {
  BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_FILTER, "relock MSG_NOSIGNAL");
  if (m != NULL && BIO_meth_set_write(m, nosigpipe_write) == 1 && BIO_meth_set_read(m, nosigpipe_read) == 1 &&
      BIO_meth_set_ctrl(m, nosigpipe_ctrl) == 1 && BIO_meth_set_create(m, nosigpipe_create) == 1 &&
      BIO_meth_set_destroy(m, nosigpipe_destroy) == 1) {
    nosigpipe_method = m; /* for the process's lifetime, like OpenSSL's own */
    return;
  }
  BIO_meth_free(m);
}

/* Puts the filter in front of ssl's socket (fd): 0, or -1 out of memory. */
static int send_without_sigpipe(SSL *ssl, int fd) {
  pthread_once(&nosigpipe_once, make_nosigpipe_method);
  BIO *filter = nosigpipe_method != NULL ? BIO_new(nosigpipe_method) : NULL;
  BIO *sock = filter != NULL ? BIO_new_socket(fd, BIO_NOCLOSE) : NULL;
  if (sock == NULL) {
    BIO_free(filter);
    return -1;
  }
  /* The handshake may be under way: the SSL keeps its state and its
   * buffering BIO across the change; the socket BIO it drops holds none. */
  BIO_push(filter, sock);
  SSL_set_bio(ssl, filter, filter);
  return 0;
}

SSL *relock__tls_start(relock__tls_t *t, redisContext *ctx, const char *host, char *msg, size_t size) {
  const struct relock_options *o = &t->settings->opt;
  const char *name = o->tls_server_name != NULL ? o->tls_server_name : host;
  ERR_clear_error();
  SSL *ssl = SSL_new(t->ctx);
  if (ssl == NULL) {
    snprintf(msg, size, "TLS: out of memory");
    return NULL;
  }
  if (!o->tls_insecure_skip_verify && set_peer_name(ssl, name) != 0) {
    snprintf(msg, size, "TLS: cannot verify the name \"%.64s\": %s", name, ssl_reason("invalid name"));
    SSL_free(ssl);
    return NULL;
  }
  if (o->tls_insecure_skip_verify && o->tls_server_name != NULL)
    SSL_set_tlsext_host_name(ssl, o->tls_server_name);
  const redisContextFuncs *plain = ctx->funcs;
  if (redisInitiateSSL(ctx, ssl) != REDIS_OK) {
    if (!relock__tls_failure(ssl, msg, size))
      snprintf(msg, size, "TLS handshake failed: %s", ctx->errstr);
    SSL_free(ssl); /* hiredis took it only on success */
    /* hiredis switched the context to its TLS functions before it failed,
     * and they would follow the NULL it left for the TLS state. */
    ctx->funcs = plain;
    return NULL;
  }
  if (send_without_sigpipe(ssl, ctx->fd) != 0) {
    snprintf(msg, size, "TLS: out of memory");
    return NULL; /* hiredis frees ssl with the context */
  }
  return ssl;
}

int relock__tls_failure(SSL *ssl, char *msg, size_t size) {
  long v = SSL_get_verify_result(ssl);
  unsigned long e = ERR_peek_last_error();
  int done = SSL_is_init_finished(ssl), reason = ERR_GET_REASON(e);
  int blame = 1;
  if (v != X509_V_OK) {
    snprintf(msg, size, "TLS: the server's certificate was refused: %s", X509_verify_cert_error_string(v));
  } else if (e != 0 && !(done && reason == SSL_R_UNEXPECTED_EOF_WHILE_READING)) {
    /* A plaintext server answers a ClientHello with an error line, which
     * reads as a record of an unknown version, or hangs up. */
    int plain = reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
                reason == SSL_R_UNEXPECTED_EOF_WHILE_READING;
    const char *why = ERR_reason_error_string(e);
    snprintf(msg, size, "TLS%s: %s%s", done ? "" : " handshake failed", why != NULL ? why : "unknown OpenSSL error",
             plain ? " (does the server speak TLS on this port?)" : "");
  } else if (!done) {
    snprintf(msg, size, "TLS handshake failed: the server closed the connection (does it speak TLS on this port?)");
  } else {
    blame = 0; /* the connection just went away */
  }
  ERR_clear_error();
  return blame;
}

int relock__tls_established(SSL *ssl) { return SSL_is_init_finished(ssl); }

int relock__tls_pending(SSL *ssl) { return SSL_pending(ssl); }

#else /* no TLS in this build */

int relock__tls_new(const relock__settings_t *s, relock__tls_t **out, relock_error_t *err) {
  *out = NULL;
  if (s->opt.tls)
    return relock__error_set(err, RELOCK_ETLS, RELOCK__NO_TLS_MESSAGE);
  return RELOCK_OK;
}

void relock__tls_free(relock__tls_t *t) { (void)t; }

struct ssl_st *relock__tls_start(relock__tls_t *t, struct redisContext *ctx, const char *host, char *msg,
                                 size_t size) {
  (void)t;
  (void)host;
  (void)ctx;
  snprintf(msg, size, "%s", RELOCK__NO_TLS_MESSAGE);
  return NULL;
}

int relock__tls_failure(struct ssl_st *ssl, char *msg, size_t size) {
  (void)ssl;
  (void)msg;
  (void)size;
  return 0;
}

int relock__tls_established(struct ssl_st *ssl) {
  (void)ssl;
  return 0;
}

int relock__tls_pending(struct ssl_st *ssl) {
  (void)ssl;
  return 0;
}

#endif
