/// Names and plain-language explanations of signals and their si_code values (Linux).
package enum SignalDescription {
    /// "SIGSEGV" for 11, "SIG42" for a number without a name.
    package static func name(_ signal: Int32) -> String {
        switch signal {
        case 1: return "SIGHUP"
        case 2: return "SIGINT"
        case 3: return "SIGQUIT"
        case 4: return "SIGILL"
        case 5: return "SIGTRAP"
        case 6: return "SIGABRT"
        case 7: return "SIGBUS"
        case 8: return "SIGFPE"
        case 9: return "SIGKILL"
        case 11: return "SIGSEGV"
        case 13: return "SIGPIPE"
        case 14: return "SIGALRM"
        case 15: return "SIGTERM"
        case 24: return "SIGXCPU"
        case 25: return "SIGXFSZ"
        case 31: return "SIGSYS"
        default: return "SIG\(signal)"
        }
    }

    /// The si_code's name: "SEGV_MAPERR", "SI_USER", "BUS_ADRERR", ...
    package static func codeName(signal: Int32, code: Int32) -> String {
        switch code {
        case 0: return "SI_USER"
        case 0x80: return "SI_KERNEL"
        case -1: return "SI_QUEUE"
        case -2: return "SI_TIMER"
        case -3: return "SI_MESGQ"
        case -4: return "SI_ASYNCIO"
        case -5: return "SI_SIGIO"
        case -6: return "SI_TKILL"
        default: break
        }
        let table: [String]
        switch signal {
        case 11:
            table = [
                "SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR", "SEGV_ACCADI", "SEGV_ADIDERR",
                "SEGV_ADIPERR", "SEGV_MTEAERR", "SEGV_MTESERR",
            ]
        case 7: table = ["BUS_ADRALN", "BUS_ADRERR", "BUS_OBJERR", "BUS_MCEERR_AR", "BUS_MCEERR_AO"]
        case 4:
            table = [
                "ILL_ILLOPC", "ILL_ILLOPN", "ILL_ILLADR", "ILL_ILLTRP", "ILL_PRVOPC", "ILL_PRVREG", "ILL_COPROC",
                "ILL_BADSTK", "ILL_BADIADDR",
            ]
        case 8:
            table = [
                "FPE_INTDIV", "FPE_INTOVF", "FPE_FLTDIV", "FPE_FLTOVF", "FPE_FLTUND", "FPE_FLTRES", "FPE_FLTINV",
                "FPE_FLTSUB", "FPE_DECOVF", "FPE_DECDIV", "FPE_DECERR", "FPE_INVASC", "FPE_INVDEC", "FPE_FLTUNK",
                "FPE_CONDTRAP",
            ]
        case 5: table = ["TRAP_BRKPT", "TRAP_TRACE", "TRAP_BRANCH", "TRAP_HWBKPT", "TRAP_UNK", "TRAP_PERF"]
        case 31: table = ["SYS_SECCOMP", "SYS_USER_DISPATCH"]
        default: table = []
        }
        if code >= 1, Int(code) <= table.count { return table[Int(code) - 1] }
        return "code \(code)"
    }

    /// exception.type of a crash: the signal and its code, e.g. "SIGSEGV (SEGV_MAPERR)".
    package static func exceptionType(signal: Int32, code: Int32) -> String {
        "\(name(signal)) (\(codeName(signal: signal, code: code)))"
    }

    /// A sentence or two that tells a developer what happened, with the fault address.
    package static func explanation(
        signal: Int32, code: Int32, faultAddress: UInt64, pc: UInt64,
        sp: UInt64, senderPID: Int64?, senderUID: Int64?
    ) -> String {
        let address = Hex.address(faultAddress)
        if code <= 0 {
            var sender = ""
            if let senderPID { sender = " by process \(senderPID)" }
            if let senderUID { sender += " (uid \(senderUID))" }
            switch signal {
            case 6:
                return
                    "The process aborted: abort() raised SIGABRT\(sender). Typical causes are a failed C assertion, an uncaught C++ exception or a library that detected corrupted state."
            default:
                return
                    "The process was sent \(name(signal))\(sender) with \(codeName(signal: signal, code: code) == "SI_TKILL" ? "tgkill" : "kill"); it did not fault by itself."
            }
        }
        // A fault next to the stack pointer is the stack's guard: a push or a store into a
        // frame that no longer fits (the store can land just above sp after `sub rsp, N`).
        let distance = faultAddress >= sp ? faultAddress - sp : sp - faultAddress
        let nearStackPointer = sp > 0 && distance < 256 * 1024
        switch (signal, code) {
        case (11, 1) where faultAddress < 4096:
            return "Null pointer dereference: the app accessed address \(address), which is not mapped."
        case (11, let c) where (c == 1 || c == 2) && nearStackPointer:
            return
                "Stack overflow: the app accessed \(address), next to its stack pointer \(Hex.address(sp)); the thread ran out of stack, usually through runaway recursion."
        case (11, 1):
            return
                "Bad memory access: the app accessed address \(address), which is not mapped (a dangling or corrupt pointer)."
        case (11, 2):
            return
                "Bad memory access: the app accessed address \(address) in a way its protection forbids (a write to read-only memory or a jump into data)."
        case (11, _):
            return "Bad memory access at \(address) (\(codeName(signal: signal, code: code)))."
        case (7, 2):
            return
                "Bus error: the app accessed \(address), which is mapped from a file but lies past the file's end (a memory-mapped file was truncated)."
        case (7, 1):
            return "Bus error: misaligned access at \(address)."
        case (7, _):
            return "Bus error at \(address) (\(codeName(signal: signal, code: code)))."
        case (4, _):
            return
                "Illegal instruction at \(Hex.address(pc)). In Swift on x86-64 this is a runtime trap (ud2): a force-unwrap of nil, an array index out of range, an arithmetic overflow, a failed precondition or fatalError."
        case (5, _):
            return
                "Trap at \(Hex.address(pc)). In Swift on arm64 this is a runtime trap (brk): a force-unwrap of nil, an index out of range, an overflow or fatalError; on x86-64 a breakpoint instruction."
        case (8, 1):
            return "Integer division by zero at \(Hex.address(pc))."
        case (8, 2):
            return "Integer overflow in a division at \(Hex.address(pc)) (for example Int.min / -1)."
        case (8, _):
            return "Arithmetic exception at \(Hex.address(pc)) (\(codeName(signal: signal, code: code)))."
        case (31, _):
            return "A system call was refused by a seccomp filter at \(Hex.address(pc))."
        default:
            return "\(name(signal)) (\(codeName(signal: signal, code: code))) at \(address)."
        }
    }
}
