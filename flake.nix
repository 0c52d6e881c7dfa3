{
  # Atlas for Nix users: `nix run .#atlas` serves (CUDA when the driver is present, the CPU
  # reference backend otherwise), `nix build .#atlas` is the application with its PTX sets
  # compiled by nixpkgs' nvcc, `nix build .#oci` the OCI image (dockerTools), and
  # `nix develop` the README's toolchain.
  #
  # `nix flake show` and `lib` need nothing but this tree: they are what CI evaluates offline
  # (Debian's nix-bin, no substituters), and `lib.pythonDependencies` is read from
  # pyproject.toml, so the Python package list cannot drift from it (tests/unit/test_flake.py).
  description = "Atlas: an LLM inference engine with per-target CUDA kernels compiled to PTX";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-24.11";

  outputs = { self, nixpkgs }:
    let
      system = "x86_64-linux";
      pyproject = builtins.fromTOML (builtins.readFile ./pyproject.toml);
      version = pyproject.project.version;

      # "numpy>=1.26" -> "numpy": the distribution names pyproject.toml depends on.
      distName = req: builtins.head (builtins.match "([A-Za-z0-9._-]+).*" req);
      pythonDependencies = map distName pyproject.project.dependencies;

      # tools/image/requirements.lock (`name==version --hash=sha256:HEX  # file.whl`): the
      # CPython 3.11 wheels the OCI image installs; packages nixpkgs lacks come from here.
      isPin = l: builtins.isString l && l != "" && builtins.substring 0 1 l != "#";
      lockLines = builtins.filter isPin
        (builtins.split "\n" (builtins.readFile ./tools/image/requirements.lock));
      parseLock = line:
        let
          m = builtins.match
            "([A-Za-z0-9._-]+)==([^ ]+) --hash=sha256:([0-9a-f]+) +# +([^ ]+)" line;
          at = builtins.elemAt m;
        in {
          name = at 0;
          value = { version = at 1; sha256 = at 2; file = at 3; };
        };
      wheelLock = builtins.listToAttrs (map parseLock lockLines);

      # The kernel targets the Nix PTX build compiles: hopper (sm_90a). gb10 (sm_121) needs
      # nvcc 12.9 or newer, which nixos-24.11's cudaPackages do not have.
      ptxTargetHw = "hopper";

      pkgs = import nixpkgs {
        inherit system;
        config = { allowUnfree = true; cudaSupport = false; };
      };
      python = pkgs.python311;

      # PyPI name -> nixpkgs python package; a name nixpkgs does not package is built from
      # the locked wheel (pkgs.fetchurl checks the lock's sha256).
      fromWheel = ps: name:
        let pin = wheelLock.${name}; in
        ps.buildPythonPackage {
          pname = name;
          inherit (pin) version;
          format = "wheel";
          src = pkgs.fetchurl {
            # PyPI's path by file name: packages/<python tag>/<initial>/<name>/<file>
            url = let
              parts = builtins.match "([^-]+)-[^-]+-([^-]+)-[^-]+-[^-]+[.]whl" pin.file;
              dist = builtins.elemAt parts 0;
              tag = builtins.elemAt parts 1;
            in "https://files.pythonhosted.org/packages/${tag}/${builtins.substring 0 1 dist}/"
              + "${dist}/${pin.file}";
            inherit (pin) sha256;
          };
          dependencies =
            if name == "cuda-bindings" then [ (pythonPackage ps "cuda-pathfinder") ] else [ ];
          nativeBuildInputs = [ pkgs.autoPatchelfHook ];
          buildInputs = [ pkgs.stdenv.cc.cc.lib ];
          # the driver's library is loaded at run time (absent: the CPU backend)
          autoPatchelfIgnoreMissingDeps = [ "libcuda.so.1" ];
        };
      pythonPackage = ps: name:
        let attr = pkgs.lib.toLower name; in
        if ps ? ${attr} then ps.${attr} else fromWheel ps name;

      src = pkgs.lib.fileset.toSource {
        root = ./.;
        fileset = pkgs.lib.fileset.unions
          [ ./py ./kernels ./bench/suites ./pyproject.toml ./setup.py ];
      };

      ptxSets = pkgs.cudaPackages.backendStdenv.mkDerivation {
        pname = "atlas-ptx-sets";
        inherit version src;
        nativeBuildInputs = [ python pkgs.cudaPackages.cuda_nvcc ];
        buildInputs = [ pkgs.cudaPackages.cuda_cudart ];
        # `atlas kernels build`'s own code (atlas.kernels.build needs only the stdlib)
        buildPhase = ''
          runHook preBuild
          ATLAS_TARGET_HW=${ptxTargetHw} PYTHONPATH=$PWD/py python -c '
          import sys
          from pathlib import Path
          from atlas.kernels.build import build_into, selected_targets
          root = Path.cwd()
          build_into(root, Path(sys.argv[1]), selected_targets(root), skip=False)
          ' $out
          rm -rf $out/.cache
          runHook postBuild
        '';
        dontInstall = true;
      };

      atlasApp = python.pkgs.buildPythonApplication {
        pname = "atlas";
        inherit version src;
        pyproject = true;
        build-system = [ python.pkgs.setuptools ];
        dependencies = map (pythonPackage python.pkgs) pythonDependencies;
        # the registry finds the sets through ATLAS_KERNELS_DIR; MODEL.toml files stay in
        # the package data the server reads
        makeWrapperArgs = [ "--set-default" "ATLAS_KERNELS_DIR" "${ptxSets}" ];
        doCheck = false;
        passthru = { inherit ptxSets; };
      };

      # A derivation whose name, type and description are known without evaluating nixpkgs,
      # so `nix flake show` lists the outputs offline; building it forces the real one
      # (drvPath, outPath).
      lazyDerivation = name: description: drv: {
        type = "derivation";
        inherit name;
        inherit (drv) drvPath outPath outputs;
        outputName = "out";
        meta = { inherit description; };
      };

      serve = pkgs.writeShellScriptBin "atlas-serve" ''
        exec ${atlasApp}/bin/atlas serve "$@"
      '';
    in {
      lib = {
        inherit version pythonDependencies wheelLock ptxTargetHw;
      };

      packages.${system} = rec {
        atlas = lazyDerivation "atlas-${version}" "Atlas with its PTX sets" atlasApp;
        default = atlas;
        ptx-sets = lazyDerivation "atlas-ptx-sets-${version}" "PTX sets (${ptxTargetHw})" ptxSets;
        # the same entry point and environment as `atlas image build` (py/atlas/image);
        # the result is a script that streams the image: `./result | podman load`
        oci = lazyDerivation "stream-atlas" "Atlas OCI image (streamed)"
          (pkgs.dockerTools.streamLayeredImage {
          name = "atlas";
          tag = version;
          contents = [ atlasApp pkgs.bashInteractive pkgs.coreutils ];
          config = {
            Entrypoint = [ "${atlasApp}/bin/atlas" "serve" ];
            Cmd = [ "--bind" "0.0.0.0" ];
            Env = [ "HOME=/root" "PYTHONUNBUFFERED=1" "NVIDIA_VISIBLE_DEVICES=all"
                    "NVIDIA_DRIVER_CAPABILITIES=compute,utility" ];
            ExposedPorts = { "8888/tcp" = { }; };
          };
        });
      };

      apps.${system} = {
        atlas = { type = "app"; program = "${serve}/bin/atlas-serve"; };
        default = self.apps.${system}.atlas;
      };

      devShells.${system}.default = lazyDerivation "atlas-dev-shell" "Atlas toolchain"
        (pkgs.mkShell {
        # the README's toolchain: Python 3.11 with Atlas's dependencies and test tools, nvcc
        # for `atlas kernels build`, mmdebstrap for `atlas image build`
        packages = [
          (python.withPackages (ps: map (pythonPackage ps) pythonDependencies
            ++ [ ps.pytest ps.pytest-xdist ps.openai ps.anthropic ps.jsonschema ps.pip ]))
          pkgs.cudaPackages.cuda_nvcc
          pkgs.mmdebstrap
          pkgs.git
        ];
        # Bazel: the README's is Debian's bazel-bootstrap 4.2.3, which nixos-24.11 does not
        # package (its Bazels are 6 and 7, whose defaults differ); use the system's.
        shellHook = ''export PYTHONPATH=$PWD/py''${PYTHONPATH:+:$PYTHONPATH}'';
      });
    };
}
