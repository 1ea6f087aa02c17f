// The client scripts' one assertion: prints "ok WHAT", or "FAIL WHAT: DETAIL"
// and exits 1 (the C++ test reads the output and the exit code).
export const check = (ok, what, detail) => {
  if (!ok) {
    console.log(`FAIL ${what}: ${detail ?? ""}`);
    process.exit(1);
  }
  console.log(`ok ${what}`);
};
