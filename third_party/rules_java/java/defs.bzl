"""The Java rule names @bazel_tools loads from @rules_java, forwarded to Bazel's native rules.

Atlas builds no Java; these exist only so that Bazel's bundled tool packages resolve
without downloading the real rules_java.
"""

def java_binary(**attrs):
    native.java_binary(**attrs)

def java_import(**attrs):
    native.java_import(**attrs)

def java_library(**attrs):
    native.java_library(**attrs)

def java_runtime(**attrs):
    native.java_runtime(**attrs)

def java_toolchain(**attrs):
    native.java_toolchain(**attrs)
