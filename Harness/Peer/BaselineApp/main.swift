// peer-baseline-app: peer-app without Aftermath (the same modes; nothing is started).
import PeerSupport

PeerRun.main(PeerRun.arguments(), start: {})
