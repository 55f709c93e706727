import Aftermath
import Foundation

let args = CommandLine.arguments
let dir = args[2]
let exporter = FileExporter(directory: dir + "/out")
try Aftermath.start(.init(serviceName: "smoke", serviceVersion: "1.0", exporter: exporter,
                          reportsDirectory: dir, deliverPendingReportsSynchronously: true))
if args[1] == "crash" {
    let p = UnsafeMutablePointer<Int>(bitPattern: 8)!
    p.pointee = 1
}
print("ok")
