/* mlock_proto: the protocol between the launcher (launcher/mlock.c) and the
 * LD_PRELOAD shim (hooks/mlock_shim.c): the environment the launcher sets
 * for the shim, and the JSON events the shim writes back on the report
 * socket (one object per datagram: its event, trigger, mode and fields).
 * Both sides spell every name from here. */
#ifndef TTS_MLOCK_PROTO_H
#define TTS_MLOCK_PROTO_H

/* The shim's file name, as installed (hooks/, ../lib/tts-launch/). */
#define MLOCK_SHIM_NAME "mlock_shim.so"

/* ---- the environment: launcher -> shim ---- */

#define MLOCK_ENV_PREFIX      "TTS_LAUNCH_MLOCK_"
#define MLOCK_ENV_FD	      MLOCK_ENV_PREFIX "FD"	     /* the report socket */
#define MLOCK_ENV_MODE	      MLOCK_ENV_PREFIX "MODE"	     /* MLOCK_MODE_NAMES */
#define MLOCK_ENV_TRIGGER     MLOCK_ENV_PREFIX "TRIGGER"     /* MLOCK_TRIGGER_NAMES */
#define MLOCK_ENV_CALLABLE    MLOCK_ENV_PREFIX "CALLABLE"    /* module:qualname */
#define MLOCK_ENV_DELAY	      MLOCK_ENV_PREFIX "DELAY"	     /* seconds */
#define MLOCK_ENV_SIGNAL      MLOCK_ENV_PREFIX "SIGNAL"	     /* number */
#define MLOCK_ENV_PATTERNS    MLOCK_ENV_PREFIX "PATTERNS"    /* globs, mode models */
#define MLOCK_ENV_LIMIT	      MLOCK_ENV_PREFIX "LIMIT"	     /* bytes, 0: max_percent */
#define MLOCK_ENV_MAX_PERCENT MLOCK_ENV_PREFIX "MAX_PERCENT" /* of MemAvailable */
#define MLOCK_ENV_BLOCKING    MLOCK_ENV_PREFIX "BLOCKING"    /* "1" or "0" */
#define MLOCK_ENV_PORT	      MLOCK_ENV_PREFIX "PORT"	     /* the listen trigger's */
#define MLOCK_ENV_EXE	      MLOCK_ENV_PREFIX "EXE"	     /* glob of the program */

/* Modes and triggers: the values of MODE and TRIGGER, and of the events'
 * "mode" and "trigger"; initializers of name tables in this order. */
enum mlock_proto_mode { MLOCK_MODE_ALL, MLOCK_MODE_MODELS, MLOCK_MODE_ONFAULT, MLOCK_N_MODES };
#define MLOCK_MODE_NAMES                                                                           \
	{                                                                                          \
		"all", "models", "onfault"                                                         \
	}

enum mlock_proto_trigger {
	MLOCK_TRIG_LISTEN,
	MLOCK_TRIG_SIGNAL,
	MLOCK_TRIG_DELAY,
	MLOCK_TRIG_CALLABLE,
	MLOCK_N_TRIGGERS
};
#define MLOCK_TRIGGER_NAMES                                                                        \
	{                                                                                          \
		"listen", "signal", "delay", "callable"                                            \
	}

/* ---- the events: shim -> launcher ---- */

#define MLOCK_EV_ARMED	 "armed"
#define MLOCK_EV_LOCKED	 "locked"
#define MLOCK_EV_REFUSED "refused"
#define MLOCK_EV_FAILED	 "failed"
#define MLOCK_EVENT_NAMES                                                                          \
	{                                                                                          \
		MLOCK_EV_ARMED, MLOCK_EV_LOCKED, MLOCK_EV_REFUSED, MLOCK_EV_FAILED                 \
	}

/* The fields: strings */
#define MLOCK_F_EVENT	"event"
#define MLOCK_F_TRIGGER "trigger"
#define MLOCK_F_MODE	"mode"
#define MLOCK_F_ERRNO	"errno" /* an error name: "EPERM" */
#define MLOCK_F_ERROR	"error" /* text */
/* integers */
#define MLOCK_F_PID		"pid"
#define MLOCK_F_START_NS	"start_ns" /* CLOCK_MONOTONIC */
#define MLOCK_F_DUR_NS		"dur_ns"
#define MLOCK_F_LIMIT		"limit" /* bytes */
#define MLOCK_F_BYTES_TO_LOCK	"bytes_to_lock"
#define MLOCK_F_RESIDENT	"resident"
#define MLOCK_F_VMLCK_BEFORE	"vmlck_before" /* -1: VmLck unreadable */
#define MLOCK_F_VMLCK		"vmlck"	       /* -1: VmLck unreadable */
#define MLOCK_F_MAPPINGS	"mappings"
#define MLOCK_F_FAILED_MAPPINGS "failed_mappings"
#define MLOCK_F_RLIMIT_MEMLOCK	"rlimit_memlock" /* -1: unlimited */
#define MLOCK_F_PORT		"port"
#define MLOCK_F_SIGNAL		"signal"
#define MLOCK_F_UID		"uid"
/* a number */
#define MLOCK_F_DELAY "delay"
/* booleans */
#define MLOCK_F_BLOCKING     "blocking"
#define MLOCK_F_CAP_IPC_LOCK "cap_ipc_lock"

/* "\"name\":", for the shim's printf formats */
#define MLOCK_KEY(f) "\"" f "\":"

#endif
