"""``trainforge formal [BLOCK|PROOF ...]``: run the SymbiYosys proofs, one line each, and a JSON report."""
from trainforge.outputs import write_json

DEFAULT_OUT = "build/formal/report.json"


def register(subparsers):
    parser = subparsers.add_parser(
        "formal", help="prove the formal properties (SymbiYosys through YoWASP; needs the fpga extra)",
        description="Run the formal proofs of the named blocks or proofs (all when none): one line each "
                    "(PASS/FAIL, seconds, and for a failure the counterexample trace and the failed assertion's "
                    "source line), and a JSON report. Exit status 1 when a proof does not pass.")
    parser.add_argument("names", nargs="*", metavar="BLOCK|PROOF", help="blocks or proofs to run (all when none)")
    parser.add_argument("--fast", action="store_true", help="only the fast proofs (those make test runs)")
    parser.add_argument("--list", action="store_true", help="list the proofs and what each proves, run none")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"the JSON report (default {DEFAULT_OUT})")
    parser.set_defaults(func=run, writes_as_it_goes=True)


def run(args):
    from trainforge import formal

    proofs = formal.proofs_named(args.names, fast_only=args.fast)
    if args.list:
        for proof in proofs:
            print(f"{proof.name:<32} {proof.mode} depth {proof.depth}{'' if proof.fast else ' (make formal only)'}: "
                  f"{proof.summary}")
        return 0
    results = []
    for proof in proofs:
        result = formal.run_proof(proof)
        print(formal.result_line(result), flush=True)
        results.append(result)
    failed = [result["proof"] for result in results if result["status"] != "PASS"]
    write_json(args.out, {"kind": "formal", "proofs": results, "passed": not failed, "failed": failed})
    print(f"{len(results) - len(failed)} of {len(results)} proofs pass; report {args.out}")
    return 1 if failed else 0
