"""The C++ rule names @bazel_tools loads from @rules_cc, forwarded to Bazel's native rules.

Atlas builds no C++ through Bazel; these exist only so that Bazel's bundled tool packages
(loaded for every py_binary) resolve without downloading the real rules_cc.
"""

def cc_binary(**attrs):
    native.cc_binary(**attrs)

def cc_library(**attrs):
    native.cc_library(**attrs)

def cc_test(**attrs):
    native.cc_test(**attrs)

def cc_import(**attrs):
    native.cc_import(**attrs)

def cc_proto_library(**attrs):
    native.cc_proto_library(**attrs)

def cc_toolchain(**attrs):
    native.cc_toolchain(**attrs)

def cc_toolchain_suite(**attrs):
    native.cc_toolchain_suite(**attrs)

def objc_library(**attrs):
    native.objc_library(**attrs)
