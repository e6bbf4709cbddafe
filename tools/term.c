/* The terminal of a full-screen view (term.h). */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "term.h"

#define ENTER_SCREEN "\033[?1049h\033[?25l" /* the alternate screen, the cursor hidden */
#define LEAVE_SCREEN "\033[?25h\033[?1049l"

static struct termios saved, raw;
static volatile sig_atomic_t keys_raw, screen_on, redraw;

static void put(const char *s, size_t n) {
  ssize_t w = write(STDOUT_FILENO, s, n); /* a terminal gone: nothing to give back */
  (void)w;
}

static void take(void) {
  if (keys_raw)
    tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  put(ENTER_SCREEN, sizeof ENTER_SCREEN - 1);
  screen_on = 1;
}

void term_restore(void) {
  if (screen_on) {
    put(LEAVE_SCREEN, sizeof LEAVE_SCREEN - 1);
    screen_on = 0;
  }
  if (keys_raw)
    tcsetattr(STDIN_FILENO, TCSANOW, &saved);
}

static void handle(int sig, void (*fn)(int)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fn;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
}

/* SIGINT, SIGTERM, SIGHUP: the terminal back, then the signal's own end
 * (the shell sees 128 + N, as for any program it ends so). */
static void on_fatal(int sig) {
  term_restore();
  keys_raw = 0;
  handle(sig, SIG_DFL);
  raise(sig);
}

/* ^Z: the terminal back, stopped; on fg, taken again and redrawn. */
static void on_stop(int sig) {
  term_restore();
  handle(sig, SIG_DFL);
  sigset_t set; /* blocked while its handler runs: it would stop only after */
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, NULL);
  raise(sig); /* stops here until SIGCONT */
  handle(sig, on_stop);
  take();
  redraw = 1;
}

static void on_winch(int sig) {
  (void)sig;
  redraw = 1;
}

void term_start(int raw_keys) {
  if (raw_keys && tcgetattr(STDIN_FILENO, &saved) == 0) {
    raw = saved;
    raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO); /* ISIG stays: ^C is SIGINT, ^Z SIGTSTP */
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    keys_raw = 1;
  }
  handle(SIGINT, on_fatal);
  handle(SIGTERM, on_fatal);
  handle(SIGHUP, on_fatal);
  handle(SIGTSTP, on_stop);
  handle(SIGWINCH, on_winch);
  take();
}

void term_size(int *rows, int *cols) {
  struct winsize ws;
  *rows = 24, *cols = 80;
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0)
    *rows = ws.ws_row, *cols = ws.ws_col;
}

int term_redraw_due(void) {
  int due = redraw;
  redraw = 0;
  return due;
}
