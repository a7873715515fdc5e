#!/bin/sh
# oneapi/ccl.hpp, with everything test_oneccl_api.cpp instantiates, compiles without a warning in
# every standard from C++11 (oneCCL's examples) through C++20; the test itself builds as C++11.
#   check_standards.sh CXX INCLUDE_DIR SOURCE
set -eu
for std in c++14 c++17 c++20; do
    "$1" -std=$std -Wall -Wextra -Werror -pedantic -fsyntax-only -I"$2" "$3"
    echo "ok: -std=$std"
done
