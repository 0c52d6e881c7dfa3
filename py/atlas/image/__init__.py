"""Daemonless, reproducible OCI images of Atlas (`atlas image build`).

An image is a Debian root filesystem (mmdebstrap, package versions pinned by
`tools/image/debian.lock`), the Python dependencies unpacked from wheels pinned with hashes
(`tools/image/requirements.lock`), Atlas's sources and the PTX sets of the selected targets
only. Every layer is a tar written here with sorted entries and fixed owners and times, and
the OCI layout (blobs, config, manifest, index.json) is written with sorted-key JSON, so the
same inputs give the same image digest on every run.
"""
