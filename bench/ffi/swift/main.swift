// Figure 2 of scripts/bench: µs per call of two cheap SDK queries through the uniffi bindings.
// Usage: FfiBench DB_DIR ITERATIONS OUT_JSON. Prints nothing but errors; asserts nothing about time.
import Foundation
@_spi(SendOnceInternal) import SendOnceFFI  // the raw core is what this bench measures

func rounds(_ iterations: Int, _ count: Int, _ call: () throws -> Void) rethrows -> [Double] {
    for _ in 0..<iterations { try call() } // warm-up
    let per = iterations / count
    var out: [Double] = []
    for _ in 0..<count {
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<per { try call() }
        out.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1000.0 / Double(per))
    }
    return out
}

let args = CommandLine.arguments
guard args.count == 4, let iterations = Int(args[2]) else {
    FileHandle.standardError.write("usage: FfiBench DB_DIR ITERATIONS OUT_JSON\n".data(using: .utf8)!)
    exit(2)
}
let core = try SendOnceCore.open(config: SendOnceConfig(baseUrl: "http://127.0.0.1:9", dbPath: args[1] + "/sdk.db"))
try core.setNetworkAvailable(available: false) // keep the sender idle
let t = try await core.sendTransfer(
    request: TransferRequest(toUserId: "usr_bench", amountMinor: 100, currency: "BDT", note: nil))
var sink: Int64 = 0
let profile = try rounds(iterations, 10) { if try core.networkProfile() == .off { sink += 1 } }
let transfer = try rounds(iterations / 10, 10) { sink += try core.transfer(localId: t.localId).amountMinor }
func arr(_ v: [Double]) -> String { "[" + v.map { String(format: "%.4f", $0) }.joined(separator: ",") + "]" }
let json = "{\"language\":\"swift\",\"network_profile_us\":\(arr(profile)),\"transfer_us\":\(arr(transfer)),\"sink\":\(sink)}\n"
try json.write(toFile: args[3], atomically: true, encoding: .utf8)
try core.shutdown()
