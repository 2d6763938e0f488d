# mk/install.mk -- `make install` / `make uninstall`; included by the
# top-level Makefile.
#
#   make install   [PREFIX=/usr/local] [DESTDIR=staging-root]
#   make uninstall [PREFIX=/usr/local] [DESTDIR=staging-root]
#
# Installs (under $(DESTDIR)):
#   $(LIBDIR)/libhakmem.so.X.Y.Z, libhakmem.so.X -> it (the soname),
#   libhakmem.so -> libhakmem.so.X (link-time name), libhakmem.a
#   $(INCLUDEDIR)/hakmem.h
#   $(PKGCONFIGDIR)/hakmem.pc            from mk/hakmem.pc.in; its Libs carry
#                                        -Wl,-rpath,$(LIBDIR) unless LIBDIR is one
#                                        the loader searches anyway (PC_RPATH below)
#   $(CMAKEDIR)/hakmem-config.cmake, hakmem-config-version.cmake
#                                        from mk/hakmem-config*.cmake.in: CMake's
#                                        find_package(hakmem CONFIG), targets
#                                        hakmem::hakmem (shared), hakmem::static
#   $(LIBDIR)/libhakmem-hardened.so.X.Y.Z, libhakmem-hardened.so -> it
#                                        the hardened build (make hardened), for
#                                        LD_PRELOAD and `hakmem run --hardened`
#   $(BINDIR)/hakmem                     the launcher, from tools/hakmem
# BINDIR, LIBDIR, INCLUDEDIR, PKGCONFIGDIR and CMAKEDIR can be set
# individually.  The paths written into hakmem.pc, the CMake files and the
# launcher never contain DESTDIR.
# PC_RPATH=auto (default): hakmem.pc's Libs add -Wl,-rpath,$(LIBDIR), so that
# `cc prog.c $(pkg-config --cflags --libs hakmem)` gives a program that starts,
# unless LIBDIR is /lib, /usr/lib, /lib64, /usr/lib64 or /lib/<multiarch>,
# /usr/lib/<multiarch> (the loader's own directories); PC_RPATH=yes or no forces it.
# uninstall removes exactly those files (directories are left in place).

PREFIX       ?= /usr/local
BINDIR       ?= $(PREFIX)/bin
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
CMAKEDIR     ?= $(LIBDIR)/cmake/hakmem
PC_RPATH     ?= auto
INSTALL      ?= install

HAKMEM_VERSION := $(shell sed -n 's/^\#define HAKMEM_VERSION_STRING "\(.*\)"/\1/p' include/hakmem.h)
HAKMEM_SOMAJOR := $(firstword $(subst ., ,$(HAKMEM_VERSION)))
HAKMEM_SONAME  := libhakmem.so.$(HAKMEM_SOMAJOR)
HAKMEM_REALSO  := libhakmem.so.$(HAKMEM_VERSION)
HAKMEM_HARDENED_REALSO := libhakmem-hardened.so.$(HAKMEM_VERSION)
HAKMEM_MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
HAKMEM_LOADER_DIRS := /lib /usr/lib /lib64 /usr/lib64 \
                      $(if $(HAKMEM_MULTIARCH),/lib/$(HAKMEM_MULTIARCH) /usr/lib/$(HAKMEM_MULTIARCH))
HAKMEM_PC_RPATH := $(if $(filter yes,$(PC_RPATH)),y,$(if $(filter auto,$(PC_RPATH)),$(if $(filter $(patsubst %/,%,$(LIBDIR)),$(HAKMEM_LOADER_DIRS)),,y)))

INSTALL_GEN := $(BUILD)/install
comma := ,
# sed replacement text: escape \ & and the | delimiter in user-supplied paths
sed_escape = $(subst |,\|,$(subst &,\&,$(subst \,\\,$(1))))
INSTALL_SED := -e 's|@PREFIX@|$(call sed_escape,$(PREFIX))|g' \
               -e 's|@LIBDIR@|$(call sed_escape,$(LIBDIR))|g' \
               -e 's|@INCLUDEDIR@|$(call sed_escape,$(INCLUDEDIR))|g' \
               -e 's|@VERSION@|$(HAKMEM_VERSION)|g' \
               -e 's|@HAKMEM_LIB@|$(call sed_escape,$(LIBDIR)/$(HAKMEM_SONAME))|g' \
               -e 's|@HAKMEM_HARDENED_LIB@|$(call sed_escape,$(LIBDIR)/libhakmem-hardened.so)|g' \
               -e 's|@HAKMEM_VERSION@|$(HAKMEM_VERSION)|g' \
               -e 's|@SOMAJOR@|$(HAKMEM_SOMAJOR)|g' \
               -e 's|@SONAME@|$(HAKMEM_SONAME)|g' \
               -e 's|@REALSO@|$(HAKMEM_REALSO)|g' \
               -e 's|@PC_RPATH@|$(if $(HAKMEM_PC_RPATH),-Wl$(comma)-rpath$(comma)$${libdir} )|g'

.PHONY: install uninstall install-check-version FORCE_INSTALL_GEN

install-check-version:
	@case '$(PC_RPATH)' in auto|yes|no) ;; *) echo "install: PC_RPATH=$(PC_RPATH): want auto, yes or no" >&2; exit 1 ;; esac
	@test -n "$(HAKMEM_VERSION)" || { echo "install: no HAKMEM_VERSION_STRING in include/hakmem.h" >&2; exit 1; }
	@test "$(HAKMEM_SOMAJOR)" = "$$(sed -n 's/^\#define HAKMEM_VERSION_MAJOR \([0-9]*\).*/\1/p' include/hakmem.h)" || \
	    { echo "install: version $(HAKMEM_VERSION) does not match HAKMEM_VERSION_MAJOR" >&2; exit 1; }
	@soname=$$(readelf -d $(BUILD)/libhakmem.so 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'); \
	    test -z "$$soname" || test "$$soname" = "$(HAKMEM_SONAME)" || \
	    { echo "install: $(BUILD)/libhakmem.so has soname $$soname, expected $(HAKMEM_SONAME)" >&2; exit 1; }

# regenerated on every install: PREFIX/LIBDIR may differ from the last run
$(INSTALL_GEN)/hakmem.pc: mk/hakmem.pc.in include/hakmem.h FORCE_INSTALL_GEN
	@mkdir -p $(dir $@)
	sed $(INSTALL_SED) $< > $@.tmp && mv $@.tmp $@
$(INSTALL_GEN)/hakmem-config.cmake: mk/hakmem-config.cmake.in include/hakmem.h FORCE_INSTALL_GEN
	@mkdir -p $(dir $@)
	sed $(INSTALL_SED) $< > $@.tmp && mv $@.tmp $@
$(INSTALL_GEN)/hakmem-config-version.cmake: mk/hakmem-config-version.cmake.in include/hakmem.h FORCE_INSTALL_GEN
	@mkdir -p $(dir $@)
	sed $(INSTALL_SED) $< > $@.tmp && mv $@.tmp $@
$(INSTALL_GEN)/hakmem: tools/hakmem include/hakmem.h FORCE_INSTALL_GEN
	@mkdir -p $(dir $@)
	sed $(INSTALL_SED) $< > $@.tmp && mv $@.tmp $@

install: release hardened install-check-version $(INSTALL_GEN)/hakmem.pc $(INSTALL_GEN)/hakmem \
         $(INSTALL_GEN)/hakmem-config.cmake $(INSTALL_GEN)/hakmem-config-version.cmake
	$(INSTALL) -d '$(DESTDIR)$(LIBDIR)' '$(DESTDIR)$(INCLUDEDIR)' '$(DESTDIR)$(PKGCONFIGDIR)' '$(DESTDIR)$(BINDIR)' \
	    '$(DESTDIR)$(CMAKEDIR)'
	$(INSTALL) -m 755 $(BUILD)/libhakmem.so '$(DESTDIR)$(LIBDIR)/$(HAKMEM_REALSO)'
	ln -sfn $(HAKMEM_REALSO) '$(DESTDIR)$(LIBDIR)/$(HAKMEM_SONAME)'
	ln -sfn $(HAKMEM_SONAME) '$(DESTDIR)$(LIBDIR)/libhakmem.so'
	$(INSTALL) -m 755 $(BUILD)/hardened/libhakmem.so '$(DESTDIR)$(LIBDIR)/$(HAKMEM_HARDENED_REALSO)'
	ln -sfn $(HAKMEM_HARDENED_REALSO) '$(DESTDIR)$(LIBDIR)/libhakmem-hardened.so'
	$(INSTALL) -m 644 $(BUILD)/libhakmem.a '$(DESTDIR)$(LIBDIR)/libhakmem.a'
	$(INSTALL) -m 644 include/hakmem.h '$(DESTDIR)$(INCLUDEDIR)/hakmem.h'
	$(INSTALL) -m 644 $(INSTALL_GEN)/hakmem.pc '$(DESTDIR)$(PKGCONFIGDIR)/hakmem.pc'
	$(INSTALL) -m 755 $(INSTALL_GEN)/hakmem '$(DESTDIR)$(BINDIR)/hakmem'
	$(INSTALL) -m 644 $(INSTALL_GEN)/hakmem-config.cmake $(INSTALL_GEN)/hakmem-config-version.cmake \
	    '$(DESTDIR)$(CMAKEDIR)/'

uninstall: install-check-version
	rm -f '$(DESTDIR)$(LIBDIR)/$(HAKMEM_REALSO)' '$(DESTDIR)$(LIBDIR)/$(HAKMEM_SONAME)' \
	      '$(DESTDIR)$(LIBDIR)/libhakmem.so' '$(DESTDIR)$(LIBDIR)/libhakmem.a' \
	      '$(DESTDIR)$(LIBDIR)/$(HAKMEM_HARDENED_REALSO)' '$(DESTDIR)$(LIBDIR)/libhakmem-hardened.so' \
	      '$(DESTDIR)$(INCLUDEDIR)/hakmem.h' '$(DESTDIR)$(PKGCONFIGDIR)/hakmem.pc' \
	      '$(DESTDIR)$(BINDIR)/hakmem' \
	      '$(DESTDIR)$(CMAKEDIR)/hakmem-config.cmake' '$(DESTDIR)$(CMAKEDIR)/hakmem-config-version.cmake'
