{
  # Placeholder flake: a development shell with the Python toolchain Atlas needs, and
  # `nix run .#atlas` wrapping tools/serve.sh. Hermetic packaging (pinned Python deps,
  # CUDA toolkit, OCI images) is its own issue; nothing here is exercised by CI yet.
  description = "Atlas: an LLM inference engine with per-target CUDA kernels compiled to PTX";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-24.11";

  outputs = { self, nixpkgs }:
    let
      system = "x86_64-linux";
      pkgs = import nixpkgs { inherit system; config.allowUnfree = true; };
      python = pkgs.python311;
    in {
      devShells.${system}.default = pkgs.mkShell {
        packages = [ python python.pkgs.pip pkgs.bazel_7 pkgs.git ];
      };
      apps.${system}.atlas = {
        type = "app";
        program = toString (pkgs.writeShellScript "atlas-serve" ''
          export PATH=${python}/bin:$PATH
          exec bash ${self}/tools/serve.sh "$@"
        '');
      };
    };
}
