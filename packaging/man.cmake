# Builds one man page: scdoc SOURCE, tidied for mandoc's lint (man-tidy.awk),
# written as OUT and gzipped as OUT.gz (what is installed).
#   cmake -DSCDOC=... -DAWK=... -DGZIP=... -DVERSION=... -DSOURCE=... -DOUT=... -P man.cmake
file(READ "${SOURCE}" text)
string(REPLACE "@PROJECT_VERSION@" "${VERSION}" text "${text}")
file(WRITE "${OUT}.scd" "${text}")
# A fixed date (scdoc reads SOURCE_DATE_EPOCH): the pages change only with their source.
if(NOT DEFINED ENV{SOURCE_DATE_EPOCH})
  file(TIMESTAMP "${SOURCE}" mtime "%s" UTC)
  set(ENV{SOURCE_DATE_EPOCH} "${mtime}")
endif()
execute_process(COMMAND "${SCDOC}" INPUT_FILE "${OUT}.scd" OUTPUT_FILE "${OUT}.raw"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "scdoc failed on ${SOURCE} (${rc})")
endif()
set(ENV{LC_ALL} C)
get_filename_component(here "${CMAKE_CURRENT_LIST_FILE}" DIRECTORY)
execute_process(COMMAND "${AWK}" -f "${here}/man-tidy.awk" "${OUT}.raw" OUTPUT_FILE "${OUT}"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "man-tidy.awk failed on ${OUT}.raw (${rc})")
endif()
execute_process(COMMAND "${GZIP}" -9 -n -c "${OUT}" OUTPUT_FILE "${OUT}.gz" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip failed on ${OUT} (${rc})")
endif()
file(REMOVE "${OUT}.scd" "${OUT}.raw")
