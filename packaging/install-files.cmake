# Install-time part of packaging/CMakeLists.txt: the example config and the
# systemd unit, with the paths of THIS install. CMAKE_INSTALL_PREFIX is the
# prefix being installed to (cmake --install --prefix, or cpack's /usr), so a
# configure-time prefix is not baked in; file(INSTALL) adds $DESTDIR.
# Set by install(CODE) before this runs: FUSESCHED_SRC, FUSESCHED_GEN,
# FUSESCHED_BINDIR, FUSESCHED_SYSCONFDIR, FUSESCHED_UNITDIR, FUSESCHED_UNIT_TYPE.

# As GNUInstallDirs: /usr -> /etc, /opt/X -> /etc/opt/X, else PREFIX/etc.
function(fusesched_abs out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

if(IS_ABSOLUTE "${FUSESCHED_SYSCONFDIR}")
  set(etc "${FUSESCHED_SYSCONFDIR}")
elseif(FUSESCHED_SYSCONFDIR STREQUAL "etc" AND CMAKE_INSTALL_PREFIX MATCHES "^/(usr/?)?$")
  set(etc "/etc")
elseif(FUSESCHED_SYSCONFDIR STREQUAL "etc" AND CMAKE_INSTALL_PREFIX MATCHES "^/opt/(.+)$")
  set(etc "/etc/opt/${CMAKE_MATCH_1}")
else()
  fusesched_abs(etc "${FUSESCHED_SYSCONFDIR}")
endif()
set(FUSESCHED_ETC "${etc}/fusesched")
fusesched_abs(bindir "${FUSESCHED_BINDIR}")
set(FUSESCHED_BIN "${bindir}/fusesched")
if(FUSESCHED_UNITDIR)
  fusesched_abs(unitdir "${FUSESCHED_UNITDIR}")
else()
  set(unitdir "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
endif()

# Generated per destination, so concurrent installs to different places never share a file.
string(MD5 key "$ENV{DESTDIR}|${CMAKE_INSTALL_PREFIX}")
set(gen "${FUSESCHED_GEN}/${key}")
configure_file("${FUSESCHED_SRC}/systemd/fusesched@.service.in" "${gen}/fusesched@.service" @ONLY)

file(INSTALL DESTINATION "${unitdir}" TYPE FILE
  PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
  FILES "${gen}/fusesched@.service")
# 0644 root: reload refuses a config file writable by group or others. An
# operator's edited copy is kept (the Debian package leaves that to dpkg: conffile).
set(conf "${FUSESCHED_SRC}/../conf/fusesched.conf")
set(installed "$ENV{DESTDIR}${FUSESCHED_ETC}/fusesched.conf")
if(EXISTS "${installed}")
  file(SHA256 "${installed}" old)
  file(SHA256 "${conf}" new)
endif()
if(EXISTS "${installed}" AND NOT old STREQUAL new)
  message(STATUS "Keeping: ${installed} (edited; the example is ${conf})")
else()
  file(INSTALL DESTINATION "${FUSESCHED_ETC}" TYPE FILE
    PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
    FILES "${conf}")
endif()
