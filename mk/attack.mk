# mk/attack.mk -- the attack suite (tests/attack/, docs/security.md); included
# by the top-level Makefile.
#
#   make attack-bins   build the attack programs into build/tests/attack/
#   make attack        build them and the release library, then print the
#                      caught counts per family for hakmem (release and
#                      hardened), glibc
#                      and each peer installed (tests/attack/compare.sh);
#                      PEERS="name=/path/lib.so ..." adds peers, as for
#                      make bench; ATTACK_CASES=1 also prints every case
#
# The programs are built at -O0 without builtins, so each misuse happens as
# written (no folding of malloc/free pairs, no inlined memcpy).

ATTACK_OUT := $(BUILD)/tests/attack
ATTACK_C := $(wildcard tests/attack/attack_*.c)
ATTACK_CC := $(wildcard tests/attack/attack_*.cc)
ATTACK_BINS := $(patsubst tests/attack/%.c,$(ATTACK_OUT)/%,$(ATTACK_C)) \
               $(patsubst tests/attack/%.cc,$(ATTACK_OUT)/%,$(ATTACK_CC))
ATTACK_WARN := -Wall -Wextra -Wno-unused-parameter -Wno-free-nonheap-object \
               -Wno-use-after-free -Wno-alloc-size-larger-than -Wno-array-bounds \
               -Wno-stringop-overflow -Wno-mismatched-dealloc
ATTACK_CFLAGS := -std=gnu11 -D_GNU_SOURCE -O0 -g -fno-builtin $(ATTACK_WARN) -pthread
ATTACK_CXXFLAGS := -std=c++17 -O0 -g -fno-builtin -fsized-deallocation -faligned-new -Wno-mismatched-new-delete \
                   $(ATTACK_WARN) -pthread

$(ATTACK_OUT)/%: tests/attack/%.c tests/attack/attack.h
	@mkdir -p $(dir $@)
	$(CC) $(ATTACK_CFLAGS) $< -o $@
$(ATTACK_OUT)/%: tests/attack/%.cc tests/attack/attack.h
	@mkdir -p $(dir $@)
	$(CXX) $(ATTACK_CXXFLAGS) $< -o $@

.PHONY: attack attack-bins
attack-bins: $(ATTACK_BINS)
attack: release hardened attack-bins
	@ATTACK_CASES='$(ATTACK_CASES)' bash tests/attack/compare.sh $(strip $(PEERS))

# suite_attack.sh runs them under the release, debug and hardened builds
TEST_DEPS += $(ATTACK_BINS)
test-bins: $(ATTACK_BINS)
