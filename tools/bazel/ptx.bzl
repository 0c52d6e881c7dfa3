"""Bazel rules that turn kernel-tree leaves into PTX-set artifacts.

Each leaf kernels/<hw>/<model>/<quant>/ becomes one target `//kernels:<hw>/<model>/<quant>`
whose output is `<hw>__<model>__<quant>.ptxset.json`, written by the same Python code as
`atlas kernels build` (atlas.kernels.build), so the bytes are identical. Bazel cannot read
file contents while loading, so it cannot know a leaf's include closure; every leaf therefore
declares every compiled file of the tree (all but BENCH.toml) as an input, and Bazel reruns a
leaf when anything it might include changes. The closure hash inside the artifact is exact.
"""

def _ptx_set_impl(ctx):
    out = ctx.actions.declare_file(ctx.attr.leaf.replace("/", "__") + ".ptxset.json")
    args = ctx.actions.args()
    args.add("--target", ctx.attr.leaf)
    args.add("--out-file", out)
    ctx.actions.run(
        executable = ctx.executable._tool,
        arguments = [args],
        inputs = ctx.files.srcs,
        outputs = [out],
        mnemonic = "PtxSet",
        progress_message = "Building PTX set %s" % ctx.attr.leaf,
        # The fixed action env (.bazelrc): PATH is /bin:/usr/bin:/usr/local/bin whatever the
        # shell's is (ptxset_tool adds the CUDA toolkit's bin), ATLAS_SKIP_BUILD passes.
        use_default_shell_env = True,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

ptx_set = rule(
    implementation = _ptx_set_impl,
    doc = "One kernel leaf's PTX-set artifact.",
    attrs = {
        "leaf": attr.string(mandatory = True, doc = "hw/model/quant, relative to kernels/"),
        "srcs": attr.label_list(allow_files = True, doc = "kernel-tree files it may compile"),
        "_tool": attr.label(
            default = "//tools/bazel:ptxset_tool",
            executable = True,
            cfg = "exec",
        ),
    },
)

def ptx_sets(name):
    """Declare one ptx_set per leaf (a directory */*/*/KERNEL.toml) and a filegroup `name`
    holding all of them; adding a leaf needs no BUILD edit."""
    srcs = native.glob(["**"], exclude = ["**/BENCH.toml", "BUILD.bazel"])
    leaves = sorted([path[:-len("/KERNEL.toml")] for path in native.glob(["*/*/*/KERNEL.toml"])])
    for leaf in leaves:
        ptx_set(name = leaf, leaf = leaf, srcs = srcs)
    native.filegroup(name = name, srcs = [":" + leaf for leaf in leaves])
