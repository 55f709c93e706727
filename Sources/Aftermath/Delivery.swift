import AftermathNextLaunch

extension Aftermath {
    /// What one delivery of pending reports did.
    public struct Delivery: Sendable, Hashable {
        /// Records the exporter acknowledged; their files are deleted.
        public var exported: Int
        /// Files that could not be reported, each moved to `rejected/` with its reason.
        public var rejected: [Rejected]
        /// Why the exporter refused a batch, when it did; those files are kept for later.
        public var exportError: String?
        /// Attachments (crashes' minidumps) their exporter acknowledged, by
        /// `apsio.attachment.id`, with what the receiver calls each (a Breakpad server's crash
        /// report id, a file's path; "" when it said nothing). They are deleted.
        public var attachments: [String: String]
        /// Why an attachment was not stored or not delivered, the first time it happened; it
        /// waits for the next delivery unless its receiver refused it for good.
        public var attachmentError: String?

        /// A file moved to `rejected/`, and why.
        public struct Rejected: Sendable, Hashable {
            /// The file's name.
            public var file: String
            /// Why it could not be reported.
            public var reason: String
        }

        /// A delivery that found nothing to send (the quiet one at start): built field by field,
        /// not from the collector's, whose optionals' copies have the runtime build their types'
        /// metadata by name.
        static func nothing() -> Delivery {
            Delivery(exported: 0, rejected: [], exportError: nil, attachments: [:], attachmentError: nil)
        }

        init(
            exported: Int, rejected: [Rejected], exportError: String?, attachments: [String: String],
            attachmentError: String?
        ) {
            self.exported = exported
            self.rejected = rejected
            self.exportError = exportError
            self.attachments = attachments
            self.attachmentError = attachmentError
        }

        init(_ d: ReportCollector.Delivery) {
            exported = d.exported
            rejected = d.rejected.map {
                Rejected(
                    file: ($0.path as String).split(separator: "/").last.map(String.init) ?? $0.path, reason: $0.reason)
            }
            exportError = d.exportError
            // Copied only when there are some: the copy goes through [String: String]'s
            // metadata, whose first use scans every image's conformance records.
            attachments = d.attachments.isEmpty ? [:] : d.attachments
            attachmentError = d.attachmentError
        }
    }
}
