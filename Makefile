# tts-launch build. Everything generated goes under build/.
# `make` builds build/tts-launch; `make check` runs every test; `make demo`
# runs the main job on the bundled IndexTTS2 simulator. V=1 shows commands.

BUILD     ?= build
PREFIX    ?= /usr/local
DESTDIR   ?=
CC        ?= gcc
CLANG     ?= clang
BPFTOOL   ?= bpftool
PYTHON    := /usr/bin/python3
MULTIARCH := $(shell $(CC) -dumpmachine)
ARCH      := $(shell uname -m | sed -e 's/x86_64/x86/' -e 's/aarch64/arm64/' -e 's/ppc64le/powerpc/')
VERSION   := $(shell git describe --always --dirty 2>/dev/null || echo 0.1)

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -D_FORTIFY_SOURCE=2 -fstack-protector-strong \
            -MMD -MP -I$(BUILD) -Ilauncher -Ibpf -I/usr/include/iniparser \
            -DTTS_LAUNCH_VERSION='"$(VERSION)"'
# The libraries but libc and libm linked in (their .a from the -dev packages
# setup installs): a start without ~0.6 ms of the dynamic loader's work
# (BENCHMARKS.md); libbpf's calls of bpf_prog_load go through progcache.c's
# wrapper (--wrap: a symbol a static libbpf cannot be made to look up).
LDLIBS   += -Wl,--wrap=bpf_prog_load -Wl,-Bstatic -lbpf -lelf -lz -lcap -liniparser -ljansson \
            -Wl,-Bdynamic -lm
# Sanitizer flags come in their own variable, appended to the project's
# flags: a CFLAGS given to make replaces CFLAGS, so it cannot carry them.
SANFLAGS ?=
CFLAGS   += $(SANFLAGS)
LDFLAGS  += $(SANFLAGS)
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -I$(BUILD) -Ibpf \
              -I/usr/include/$(MULTIARCH) -Wall -Werror

# One BPF object from many files (STYLE.md 15): each bpf/X.bpf.c (a domain)
# compiles to build/bpf/X.bpf.o; `bpftool gen object` links them into
# build/trace.bpf.o, whose skeleton (trace.skel.h) and min-BTF the tracer embeds.
BPF_SRCS  := $(wildcard bpf/*.bpf.c)
# The link order: maps.bpf.o first (it defines the maps the others declare
# extern: bpftool 7.1, libbpf 1.1, leaves a relocation against an extern map
# unresolved when the extern comes before the definition), then the domains
# in the order their programs are attached (sys_enter, sys_exit first, as in
# the timeline's probe list). A new bpf/X.bpf.c not named here links last.
BPF_ORDER := maps syscalls tree faults sched block net names python gpu files attrib libcio
BPF_PARTS := $(patsubst %,$(BUILD)/bpf/%.bpf.o,$(BPF_ORDER)) \
             $(filter-out $(patsubst %,$(BUILD)/bpf/%.bpf.o,$(BPF_ORDER)), \
                          $(patsubst bpf/%.bpf.c,$(BUILD)/bpf/%.bpf.o,$(BPF_SRCS)))
BPF_OBJS  := $(BUILD)/trace.bpf.o
SKELS     := $(BUILD)/trace.skel.h
MINBTFS   := $(BUILD)/trace.minbtf.h
MINBTF_RAW := $(BUILD)/trace.min.btf
# Every C file clang-format checks (make format, make format-check).
FORMAT_SRCS = $(wildcard launcher/*.c launcher/*.h bpf/*.c bpf/*.h hooks/*.c hooks/*.h tests/unit/*.c \
              tests/unit/*.h tests/helpers/*.c tests/fuzz/*.c tests/fuzz/*.h)
SRCS      := $(wildcard launcher/*.c)
OBJS      := $(patsubst launcher/%.c,$(BUILD)/launcher/%.o,$(SRCS))
LIB_OBJS  := $(filter-out $(BUILD)/launcher/main.o,$(OBJS))
HOOK_SRCS := $(wildcard hooks/*.c)
HOOKS     := $(patsubst hooks/%.c,$(BUILD)/hooks/%.so,$(HOOK_SRCS))
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNITS     := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(UNIT_SRCS))
# cudaprobe (tests/e2e/test_gpu.py) needs the CUDA toolkit's headers and
# libcudart: built only where /usr/local/cuda exists, as cudaprobe (dlopen)
# and cudaprobe-linked (-lcudart, mapped before main).
CUDA_HOME ?= /usr/local/cuda
HAVE_CUDA := $(wildcard $(CUDA_HOME)/include/cuda_runtime_api.h)
HELPER_SRCS := $(filter-out tests/helpers/cudaprobe.c,$(wildcard tests/helpers/*.c))
HELPERS   := $(patsubst tests/helpers/%.c,$(BUILD)/tests/helpers/%,$(HELPER_SRCS)) \
             $(if $(HAVE_CUDA),$(BUILD)/tests/helpers/cudaprobe $(BUILD)/tests/helpers/cudaprobe-linked)
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZERS   := $(patsubst tests/fuzz/%.c,$(BUILD)/tests/fuzz/%,$(FUZZ_SRCS))

# The sanitizer builds (DESIGN.md): the same sources with the project's flags,
# by clang, with ASan and UBSan (any undefined behaviour aborts), each in its
# own build folder. unit-asan runs the unit tests there; the fuzz targets
# (tests/fuzz/README.md) also get libFuzzer's coverage instrumentation.
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
SAN_CC     ?= clang
SAN        := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SAN_MAKE    = CFLAGS='-O1 -g' $(MAKE) --no-print-directory CC=$(SAN_CC) MULTIARCH=$(MULTIARCH)
SAN_ENV    := ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1 \
              UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# make fuzz: FUZZ_TIME seconds per target; make check: FUZZ_SMOKE_TIME.
FUZZ_TIME       ?= 180
FUZZ_SMOKE_TIME ?= 10

.DELETE_ON_ERROR:
# Generated BPF artefacts are kept between runs: as make intermediates they
# would be deleted after the first build, and the next make in a fresh clone
# would rebuild BPF, the skeleton and (through -MMD) the tracer.
.SECONDARY: $(BPF_PARTS) $(BPF_OBJS) $(SKELS) $(MINBTFS) $(MINBTF_RAW)
.PHONY: all install check unit e2e demo bench setup clean format format-check unit-asan fuzzers FORCE \
	fuzz-build fuzz fuzz-smoke npm-hub

all: $(BUILD)/tts-launch $(HOOKS)

$(BUILD) $(BUILD)/bpf $(BUILD)/launcher $(BUILD)/hooks $(BUILD)/tests/unit $(BUILD)/tests/helpers $(BUILD)/tests/fuzz:
	$(Q)mkdir -p $@

$(BUILD)/vmlinux.h: | $(BUILD)
	$(call msg,GEN,$@)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(BUILD)/bpf/%.bpf.o: bpf/%.bpf.c $(BUILD)/vmlinux.h | $(BUILD)/bpf
	$(call msg,BPF,$@)
	$(Q)$(CLANG) $(BPF_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/trace.bpf.o: $(BPF_PARTS)
	$(call msg,BPFLINK,$@)
	$(Q)$(BPFTOOL) gen object $@ $^

$(BUILD)/trace.skel.h: $(BUILD)/trace.bpf.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name trace_bpf > $@

# BTFGen (bpftool gen min_core_btf): only the kernel types X.bpf.o relocates
# against, embedded with the identity of the kernel it came from. On that
# kernel libbpf loads in a few ms instead of parsing all of vmlinux BTF (~40 ms);
# launcher/tracer.c falls back to the full BTF on any other kernel.
$(BUILD)/%.min.btf: $(BUILD)/%.bpf.o
	$(call msg,BTFGEN,$@)
	$(Q)$(BPFTOOL) gen min_core_btf /sys/kernel/btf/vmlinux $@ $<

$(BUILD)/%.minbtf.h: $(BUILD)/%.min.btf $(BUILD)/%.bpf.o
	$(call msg,GEN,$@)
	$(Q){ printf 'static const unsigned char $*_min_btf[] = {\n'; \
	  od -An -v -tx1 $< | sed -e 's/ \([0-9a-f][0-9a-f]\)/0x\1,/g'; \
	  printf '};\nstatic const char $*_min_btf_kernel[] = "%s|%s|%s";\n' \
	    "$$(uname -r)" "$$(uname -v)" "$$(stat -c %s /sys/kernel/btf/vmlinux)"; \
	  printf 'static const char $*_obj_hash[] = "%s";\n' \
	    "$$(sha256sum $(BUILD)/$*.bpf.o | cut -c1-32)"; } > $@

# The skeleton and min-BTF header exist before any object compiles (order-only);
# only the objects that include them (tracer's, as -MMD records) rebuild when
# they change.
$(BUILD)/launcher/%.o: launcher/%.c | $(SKELS) $(MINBTFS) $(BUILD)/launcher
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

# The two objects that say the version (--version, the timeline's
# launcher.version) rebuild when it changes (a commit, a tree made dirty or
# clean): the stamp is rewritten only then.
VERSION_STAMP := $(BUILD)/version
$(VERSION_STAMP): FORCE | $(BUILD)/launcher
	$(Q)echo '$(VERSION)' | cmp -s - $@ || echo '$(VERSION)' > $@
$(BUILD)/launcher/main.o $(BUILD)/launcher/timeline.o: $(VERSION_STAMP)
FORCE:

$(BUILD)/tts-launch: $(OBJS)
	$(call msg,LD,$@)
	$(Q)$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

# The shim's callable trigger needs Python's headers (python3-dev), not
# libpython: it finds the C API in the interpreter it is loaded into.
PY_INCLUDES := $(shell $(PYTHON)-config --includes 2>/dev/null)
HOOK_CFLAGS := $(if $(PY_INCLUDES),-DHAVE_PYTHON $(PY_INCLUDES))

$(BUILD)/hooks/%.so: hooks/%.c | $(BUILD)/hooks
	$(call msg,CC,$@)
	$(Q)$(CC) $(filter-out -Werror,$(CFLAGS)) $(HOOK_CFLAGS) -Werror -fPIC -shared $< -o $@ -ldl -lpthread

$(BUILD)/tests/unit/%: tests/unit/%.c $(LIB_OBJS) | $(BUILD)/tests/unit
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -Itests/unit $< $(LIB_OBJS) $(LDLIBS) -lcmocka -o $@

$(BUILD)/tests/helpers/%: tests/helpers/%.c | $(BUILD)/tests/helpers
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) $< -o $@

$(BUILD)/tests/helpers/cudaprobe: tests/helpers/cudaprobe.c | $(BUILD)/tests/helpers
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -I$(CUDA_HOME)/include $< -o $@ -ldl

$(BUILD)/tests/helpers/cudaprobe-linked: tests/helpers/cudaprobe.c | $(BUILD)/tests/helpers
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -MF $@.d -DCUDAPROBE_LINKED -I$(CUDA_HOME)/include $< -o $@ \
		-L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart

# Only in a build whose SANFLAGS has -fsanitize=fuzzer-no-link (fuzz-build).
$(BUILD)/tests/fuzz/%: tests/fuzz/%.c $(LIB_OBJS) | $(BUILD)/tests/fuzz
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -fsanitize=fuzzer -Itests/fuzz $< $(LIB_OBJS) $(LDLIBS) -o $@

fuzzers: $(FUZZERS)

setup:
	$(Q)scripts/setup

# The binary, the shim, the man page, the systemd unit and the docs its
# Documentation= names (README.md, docs/diagnose.md), the example config.
DOCS := README.md docs/diagnose.md docs/timeline.md docs/mlock.md docs/security.md docs/gpu.md \
        docs/compare.md docs/views.md
install: $(BUILD)/tts-launch $(HOOKS)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib/tts-launch $(DESTDIR)$(PREFIX)/share/doc/tts-launch \
		$(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/lib/systemd/system
	install -m 0755 $(BUILD)/tts-launch $(DESTDIR)$(PREFIX)/bin/tts-launch
	$(if $(HOOKS),install -m 0644 $(HOOKS) $(DESTDIR)$(PREFIX)/lib/tts-launch/)
	install -m 0644 conf/tts-launch.ini $(DESTDIR)$(PREFIX)/share/doc/tts-launch/tts-launch.ini.example
	install -m 0644 $(DOCS) $(DESTDIR)$(PREFIX)/share/doc/tts-launch/
	install -m 0644 docs/tts-launch.1 $(DESTDIR)$(PREFIX)/share/man/man1/tts-launch.1
	install -m 0644 conf/tts-launch.service $(DESTDIR)$(PREFIX)/lib/systemd/system/tts-launch.service

unit: $(UNITS)
	$(Q)set -e; for t in $(UNITS); do echo "== $$t"; $$t; done

# Hugging Face's JavaScript client, pinned by tests/js/package-lock.json, for
# tests/e2e/test_sim_world.py (which fails without it only when CI is set).
NPM_HUB = $(BUILD)/npm/node_modules/@huggingface/hub/package.json
npm-hub: $(NPM_HUB)
$(NPM_HUB): tests/js/package.json tests/js/package-lock.json
	$(Q)mkdir -p $(BUILD)/npm && cp tests/js/package.json tests/js/package-lock.json $(BUILD)/npm/
	$(Q)cd $(BUILD)/npm && npm ci --no-audit --no-fund --loglevel=error

# The end-to-end tests in E2E_JOBS parallel workers (pytest-xdist; the tests
# mostly wait on services, downloads and timeouts: 2 workers on 2 cores
# halve the time, 4 made load-sensitive tests fail), the demo's tests on one
# of them (xdist_group "demo"), then the tests marked serial (they look at
# every keeper and tracefs definition of the host) alone. Without xdist:
# one after the other.
E2E_JOBS ?= 2
HAVE_XDIST = $(shell $(PYTHON) -c 'import xdist' 2>/dev/null && echo yes)
e2e: all $(HELPERS)
	-$(Q)$(MAKE) --no-print-directory npm-hub
	$(Q)$(PYTHON) -m pytest -q -p no:cacheprovider --durations=10 -m "not serial" \
		$(if $(HAVE_XDIST),-n $(E2E_JOBS) --dist loadgroup) tests/e2e
	$(Q)$(PYTHON) -m pytest -q -p no:cacheprovider -m serial tests/e2e

unit-asan:
	$(Q)$(SAN_ENV) $(SAN_MAKE) BUILD=$(ASAN_BUILD) SANFLAGS='$(SAN)' unit

fuzz-build:
	$(Q)$(SAN_MAKE) BUILD=$(FUZZ_BUILD) SANFLAGS='-fsanitize=fuzzer-no-link $(SAN)' fuzzers

# Each target for FUZZ_TIME seconds from the committed seeds, keeping what it
# finds in $(FUZZ_BUILD)/corpus; crashes land in $(FUZZ_BUILD)/artifacts.
fuzz: fuzz-build
	$(Q)$(SAN_ENV) tests/fuzz/run $(FUZZ_BUILD) $(FUZZ_TIME)

# Every seed and regression input once, then a short run from a fixed seed.
fuzz-smoke: fuzz-build
	$(Q)$(SAN_ENV) tests/fuzz/run --smoke $(FUZZ_BUILD) $(FUZZ_SMOKE_TIME)

check: setup
	$(Q)$(MAKE) --no-print-directory format-check
	$(Q)$(MAKE) --no-print-directory all $(UNITS) $(HELPERS)
	$(Q)$(MAKE) --no-print-directory unit
	$(Q)$(MAKE) --no-print-directory unit-asan
	$(Q)$(MAKE) --no-print-directory fuzz-smoke
	$(Q)$(MAKE) --no-print-directory e2e

# GENERATION=classic (or DEMO_GENERATION=classic): the 2025 IndexTTS2
# (scripts/demo --generation classic); the default, 2026, needs root
GENERATION ?= $(or $(DEMO_GENERATION),2026)
demo: setup
	$(Q)$(MAKE) --no-print-directory all
	$(Q)scripts/demo --generation $(GENERATION)

bench: setup
	$(Q)$(MAKE) --no-print-directory all $(HELPERS)
	$(Q)scripts/bench/run-all

format:
	clang-format -i $(FORMAT_SRCS)

# The tree stays as .clang-format writes it (part of make check).
format-check:
	$(Q)clang-format --dry-run --Werror $(FORMAT_SRCS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)

-include $(wildcard $(BUILD)/launcher/*.d $(BUILD)/hooks/*.d $(BUILD)/bpf/*.bpf.d $(BUILD)/tests/unit/*.d $(BUILD)/tests/fuzz/*.d)

# No jansson: these modules read the model only through its typed views
# (launcher/timeline_view.h). jansson's include guard defined, any json_t
# use there fails to compile (issue 13). Add each renderer, rule file or
# compare here once it is off the raw tree.
NO_JANSSON := render render_html render_perfetto render_perfetto_attr render_prom render_svg render_text report jsonw \
              compare peers render_attrib compare_attrib render_flame attrib_native
$(patsubst %,$(BUILD)/launcher/%.o,$(NO_JANSSON)): CFLAGS += -DJANSSON_H
