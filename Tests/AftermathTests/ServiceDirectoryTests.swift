import Foundation
import Testing
import Aftermath
import AftermathNextLaunch
import AftermathTesting
import TestSupport

/// Where a service without a home keeps its reports, and a start that never ends the app.
@Suite("Service directories")
struct ServiceDirectoryTests {
    @Test("STATE_DIRECTORY (systemd) wins; its first path when there are several")
    func stateDirectory() {
        let env = ["STATE_DIRECTORY": "/var/lib/shop:/var/lib/other", "XDG_STATE_HOME": "/x", "HOME": "/root"]
        #expect(ReportDirectory.defaultRoot(serviceName: "shop", environment: env) == "/var/lib/shop/aftermath/shop")
    }

    @Test("XDG_STATE_HOME, then HOME's ~/.local/state")
    func xdgThenHome() throws {
        let home = TestSupport.childDirectory("home")
        #expect(mkdir(home, 0o700) == 0)
        #expect(
            ReportDirectory.defaultRoot(serviceName: "s", environment: ["XDG_STATE_HOME": "/x", "HOME": home])
                == "/x/aftermath/s")
        #expect(
            ReportDirectory.defaultRoot(serviceName: "s", environment: ["HOME": home])
                == home + "/.local/state/aftermath/s")
    }

    @Test("No usable home (unset, missing, not a directory): a private directory under /var/tmp")
    func noHome() throws {
        let file = TestSupport.childDirectory("home-file")
        try TestSupport.write([], to: file)
        let expected = "/var/tmp/aftermath-\(geteuid())/s"
        #expect(ReportDirectory.defaultRoot(serviceName: "s", environment: [:]) == expected)
        #expect(ReportDirectory.defaultRoot(serviceName: "s", environment: ["HOME": "/nonexistent"]) == expected)
        #expect(ReportDirectory.defaultRoot(serviceName: "s", environment: ["HOME": file]) == expected)
        #expect(ReportDirectory.defaultRoot(serviceName: "s", environment: ["HOME": ""]) == expected)
    }

    #if compiler(>=6.2)  // exit tests (#expect(processExitsWith:)) need Swift 6.2
    @Test("start() without HOME, as a DynamicUser= service runs: no error, reports in the fallback")
    func startWithoutHome() async throws {
        let service = "nohome-\(UUID().uuidString.prefix(8))"
        await #expect(processExitsWith: .success) { [service = service as String] in
            unsetenv("HOME")
            unsetenv("XDG_STATE_HOME")
            unsetenv("STATE_DIRECTORY")
            let config = Aftermath.Configuration(
                serviceName: service, serviceVersion: "1", exporter: InMemoryExporter())
            do { try Aftermath.start(config) } catch { exit(2) }
            let ok =
                config.reportsDirectory == "/var/tmp/aftermath-\(geteuid())/\(service)"
                && FileManager.default.fileExists(atPath: config.reportsDirectory + "/runs")
            try? FileManager.default.removeItem(atPath: config.reportsDirectory)
            exit(ok ? 0 : 1)
        }
    }

    @Test("start() with STATE_DIRECTORY set uses it")
    func startWithStateDirectory() async throws {
        let state = TestSupport.childDirectory("state")
        #expect(mkdir(state, 0o700) == 0)
        await #expect(processExitsWith: .success) { [state = state as String] in
            setenv("STATE_DIRECTORY", state, 1)
            let config = Aftermath.Configuration(serviceName: "svc", serviceVersion: "1", exporter: InMemoryExporter())
            do { try Aftermath.start(config) } catch { exit(2) }
            exit(FileManager.default.fileExists(atPath: state + "/aftermath/svc/runs") ? 0 : 1)
        }
    }

    @Test("Under umask 0277 every file and directory start creates is still 0600 / 0700")
    func restrictiveUmask() async throws {
        let directory = TestSupport.childDirectory("umask")
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            umask(0o277)
            let config = Aftermath.Configuration(
                serviceName: "umask", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: directory, deliverPendingReportsSynchronously: true)
            do { try Aftermath.start(config) } catch { exit(2) }
            _ = Aftermath.record(error: CocoaError(.fileNoSuchFile))
            func mode(_ path: String) -> mode_t {
                var st = stat()
                return lstat(path, &st) == 0 ? st.st_mode & 0o7777 : 0
            }
            var bad: [String] = []
            for sub in ["", "/crashes", "/hangs", "/runs", "/errors", "/rejected"] where mode(directory + sub) != 0o700
            {
                bad.append(sub)
            }
            for sub in ["crashes", "runs", "errors"] {
                let names = (try? FileManager.default.contentsOfDirectory(atPath: directory + "/" + sub)) ?? []
                if names.isEmpty { bad.append("no file in \(sub)") }
                for name in names where mode(directory + "/" + sub + "/" + name) != 0o600 {
                    bad.append(sub + "/" + name)
                }
            }
            if mode(directory + "/.deliver.lock") != 0o600 { bad.append(".deliver.lock") }
            exit(bad.isEmpty ? 0 : 1)
        }
    }

    @Test("start() refuses a reports directory owned by another user: StartError, the app goes on")
    func startRefusesForeignDirectory() async throws {
        guard geteuid() == 0 else {
            print("SKIPPED startRefusesForeignDirectory: needs root to chown a directory to another user")
            return
        }
        let directory = TestSupport.childDirectory("foreign-start")
        try ReportDirectory(root: directory).prepare()
        #expect(chown(directory, 65534, 65534) == 0)
        await #expect(processExitsWith: .success) { [directory = directory as String] in
            let config = Aftermath.Configuration(
                serviceName: "s", serviceVersion: "1", exporter: InMemoryExporter(),
                reportsDirectory: directory)
            do {
                try Aftermath.start(config)
                exit(1)
            } catch {
                guard case Aftermath.StartError.reportsDirectoryUnusable(let path, let reason) = error,
                    path == directory,
                    reason.contains("owned by uid 65534")
                else { exit(3) }
                exit(0)
            }
        }
    }
    #endif
}
