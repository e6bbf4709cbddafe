/* The terminal of a full-screen view (relock top): the alternate screen,
 * the cursor hidden, keys read raw (no line editing, no echo; ^C still
 * SIGINT), and everything given back on the way out - also when a signal
 * ends the program (SIGINT, SIGTERM, SIGHUP) or stops it (^Z: given back,
 * then taken again on fg). Plain termios and ANSI escapes. */
#ifndef RELOCK_TOOLS_TERM_H
#define RELOCK_TOOLS_TERM_H

/* Takes the terminal on standard output (and standard input's keys if
 * raw_keys) and installs the signal handlers. */
void term_start(int raw_keys);

/* Gives the terminal back as it was. Async-signal-safe; again is harmless. */
void term_restore(void);

/* The screen's size (80x24 when it cannot be asked). */
void term_size(int *rows, int *cols);

/* Whether the screen must be drawn again (resized, or back from a stop)
 * since the last call. */
int term_redraw_due(void);

#endif /* RELOCK_TOOLS_TERM_H */
