// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMClient
import AFMImageCodec
import AFMStore
import AFMSystem
import Foundation

/// The interactive `afm chat`: a prompt, slash-commands, streamed answers, and the history store.
///
/// Everything runs on the main thread: one `poll(2)` loop over the keyboard (and, while an answer streams, the
/// socket), synchronous SQLite calls between keys. Nothing here is async, so nothing blocks a cooperative pool.
final class ChatSession {
    private let store: HistoryStore
    private let console: Console
    private let client: ResponsesClient
    private let keyboard = FileDescriptor(rawValue: 0)
    private let terminal: Terminal?
    private var editor: LineEditor
    private var requestedModel: String?
    private var model: String?
    private var current: ConversationSummary?
    /// The lowest sequence shown of the open conversation (for /earlier).
    private var earliestShown: Int64?
    private var listOffset = 0
    private var attachments: [NormalizedImage] = []
    private var confirmingDelete: ConversationSummary?
    private var typeAhead: [UInt8] = []
    private var savedDraft = ""
    private var running = true
    /// Readable after the terminal changed size (SIGWINCH), so the line is drawn again at the new width.
    private let resized: EventFD?
    /// The conversation whose inputs ``editor`` recalls (`.some(nil)`: none open; nil: not loaded yet).
    private var historyConversation: String??

    init(store: HistoryStore, console: Console, client: ResponsesClient, model: String?) {
        self.store = store
        self.console = console
        self.client = client
        requestedModel = model
        let interactive = Terminal.isTerminal(keyboard)
        terminal = interactive ? Terminal(descriptor: keyboard) : nil
        editor = LineEditor(echo: interactive)
        resized = interactive ? try? EventFD() : nil
        if let resized {
            // SIGWINCH is blocked in every thread (AfmMain) and taken here; the main loop polls the eventfd.
            try? SignalListener.start([SIGWINCH]) { _ in resized.signal() }
        }
    }

    /// The terminal's width (80 when unknown).
    private var columns: Int { Terminal.columns(console.output) ?? Terminal.columns(keyboard) ?? 80 }

    // MARK: - Loop

    /// Runs until /quit or end of input; returns the exit status.
    func run() -> Int32 {
        if let terminal {
            do { try terminal.enterKeyMode() } catch { console.error("afm: cannot set up the terminal: \(error)") }
            // Bracketed paste: the terminal marks pasted text, so its line breaks do not send it early.
            console.write("\u{1B}[?2004h")
        }
        defer {
            if terminal != nil { console.write("\u{1B}[?2004l") }
            terminal?.restore()
        }
        restoreSession()
        prompt()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while running {
            var bytes = typeAhead
            typeAhead = []
            if bytes.isEmpty {
                let ready = (try? PollSet.waitReadable([keyboard] + (resized.map { [$0.descriptor] } ?? []), timeoutMilliseconds: -1)) ?? []
                if let resized, ready.contains(resized.descriptor) {
                    resized.drain()
                    console.write(editor.redraw(columns: columns))
                    if !ready.contains(keyboard) { continue }
                }
                let result = try? buffer.withUnsafeMutableBytes { try keyboard.read(into: $0) }
                if case .wouldBlock? = result { continue }
                // A read error (a terminal that went away) ends the session like end of input, instead of
                // polling a descriptor that stays readable.
                guard case .processed(let count)? = result, count > 0 else {
                    handleEndOfInput()
                    break
                }
                bytes = Array(buffer[0..<count])
            }
            var echo = ""
            for (index, byte) in bytes.enumerated() {
                guard let action = editor.feed(byte, echoing: &echo) else { continue }
                console.write(echo)
                echo = ""
                switch action {
                case .line(let line):
                    // Keys typed after Enter belong to the next prompt.
                    typeAhead = Array(bytes[(index + 1)...])
                    handle(line: line)
                    if running { prompt() }
                case .interrupt:
                    typeAhead = Array(bytes[(index + 1)...])
                    confirmingDelete = nil
                    prompt()
                case .endOfInput:
                    handleEndOfInput()
                }
                break
            }
            console.write(echo)
            if terminal != nil && editor.needsRedraw && running { console.write(editor.redraw(columns: columns)) }
            saveDraftIfChanged(typing: true)
        }
        saveDraftIfChanged()
        return 0
    }

    private func handleEndOfInput() {
        if terminal != nil { console.write("\n") }
        running = false
    }

    private func prompt() {
        guard running, terminal != nil else { return }
        let label = confirmingDelete != nil ? "delete? [y/N]> " : attachments.isEmpty ? "you> " : "you [\(attachments.count) image(s)]> "
        if historyConversation != .some(current?.id) {
            historyConversation = .some(current?.id)
            editor.history = (try? store.inputHistory(conversationID: current?.id)) ?? []
        }
        // The line may hold a draft from the history or an imported archive: shown escaped, kept as stored.
        console.write(editor.start(prompt: console.bold(label), columns: columns))
    }

    /// Saves the prompt line as the draft. Only an interactive session has drafts: a piped one neither
    /// restores nor saves nor clears them, so piping into `afm chat` never loses what was typed in a terminal.
    ///
    /// - Parameter typing: called between keys (the prompt is on screen and is drawn again after a notice).
    private func saveDraftIfChanged(typing: Bool = false) {
        guard terminal != nil else { return }
        let text = confirmingDelete == nil ? editor.text : savedDraft
        guard text != savedDraft else { return }
        do {
            try store.saveDraft(text, conversationID: current?.id)
            savedDraft = text
        } catch {
            guard let open = current, isGone(open) else {
                console.error("afm: cannot save the draft: \(error)")
                return
            }
            conversationGone(open)
            if text.isEmpty {
                savedDraft = text  // nothing to keep: an older loose draft is not overwritten with an empty line
            } else {
                saveDraftIfChanged()  // into the loose draft now (current is nil: no second round)
            }
            if typing { prompt() }
        }
    }

    /// Whether another process deleted `conversation` (false when that cannot be read).
    private func isGone(_ conversation: ConversationSummary) -> Bool {
        do { return try store.conversation(id: conversation.id) == nil } catch { return false }
    }

    /// The open conversation was deleted by another process: the session goes on with none open, so the line
    /// on the prompt is kept as the loose draft and the next message starts a new conversation.
    private func conversationGone(_ conversation: ConversationSummary) {
        current = nil
        earliestShown = nil
        if (try? store.appState("current_conversation")) == conversation.id { try? store.setAppState("current_conversation", nil) }
        savedDraft = (try? store.draft(conversationID: nil)) ?? ""
        // No title or id in the notice: both may be imported text, and the prompt line is what matters here.
        console.write("\n" + console.dim("(the open conversation was deleted by another afm; your next message starts a new one)") + "\n")
    }

    /// Puts a conversation's draft on the prompt (not in a piped session: it would prefix the next line read).
    private func showDraft(_ draft: String) {
        guard terminal != nil else { return }
        savedDraft = draft
        editor.set(draft)
    }

    private func restoreSession() {
        if let id = try? store.appState("current_conversation"), let conversation = try? store.conversation(id: id) {
            current = conversation
        }
        if store.reopenedPendingCount > 0 {
            console.write(console.dim("(\(store.reopenedPendingCount) unfinished answer(s) from last time are marked interrupted)") + "\n")
        }
        let title = current.map { "\"\(console.field($0.title))\" (\(console.field($0.id.prefix(8))))" } ?? "a new conversation"
        console.write(console.bold("afm chat") + " — \(title) — /help for commands\n")
        if let current { showMessages(try? store.messages(conversationID: current.id, limit: 20), header: false) }
        guard terminal != nil else { return }  // a piped session has no line to restore into
        savedDraft = (try? store.draft(conversationID: current?.id)) ?? ""
        editor.set(savedDraft)
        if !savedDraft.isEmpty { console.write(console.dim("(draft restored)") + "\n") }
    }

    // MARK: - Lines and commands

    private func handle(line: String) {
        if let conversation = confirmingDelete {
            confirmingDelete = nil
            if line.trimmingCharacters(in: .whitespaces).lowercased() == "y" {
                do {
                    try store.delete(conversationID: conversation.id)
                    console.write("deleted \"\(console.field(conversation.title))\"\n")
                    if current?.id == conversation.id { startNew(announce: false) }
                } catch {
                    console.error("afm: \(error)")
                }
            } else {
                console.write("kept \"\(console.field(conversation.title))\"\n")
            }
            editor.set(savedDraft)
            return
        }
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { return }
        guard trimmed.hasPrefix("/") else {
            send([.text(line)], typedLine: line)
            // Kept for Up/Down and Ctrl-R in the conversation it went to (a new one is created by send).
            remember(line)
            return
        }
        remember(line)
        let command = trimmed.prefix { $0 != " " }
        let argument = trimmed.dropFirst(command.count).trimmingCharacters(in: .whitespaces)
        switch command {
        case "/quit", "/exit", "/q": running = false
        case "/help": console.write(AfmHelp.text.components(separatedBy: "Commands in a chat:").last.map { "Commands:" + $0 } ?? "")
            console.write("\n")
        case "/new": startNew(announce: true)
        case "/list": listOffset = 0; list()
        case "/more": list()
        case "/open": open(argument)
        case "/earlier": earlier()
        case "/search": search(argument)
        case "/rename": rename(argument)
        case "/delete": delete()
        case "/attach": attach(argument)
        case "/retry": retry()
        case "/copy": copy()
        default: console.write("unknown command \(console.field(command)) — /help lists them\n")
        }
    }

    /// Records a typed line in the input history of the open conversation (interactive sessions only).
    private func remember(_ line: String) {
        guard terminal != nil else { return }
        try? store.recordInput(line, conversationID: current?.id)
        if historyConversation == .some(current?.id), editor.history.last != line { editor.history.append(line) }
    }

    private func startNew(announce: Bool) {
        saveDraftIfChanged()  // the line that said /new is gone from the prompt: the old conversation's draft too
        current = nil
        earliestShown = nil
        try? store.setAppState("current_conversation", nil)
        showDraft((try? store.draft(conversationID: nil)) ?? "")
        if announce { console.write("new conversation\n") }
    }

    private func list() {
        do {
            let total = try store.conversationCount()
            let page = try store.listConversations(limit: 50, offset: listOffset)
            if page.isEmpty {
                console.write(listOffset == 0 ? "no conversations yet\n" : "no more conversations\n")
                return
            }
            for summary in page {
                let date = Self.format(milliseconds: summary.updatedAt)
                let title = summary.title.isEmpty ? "(untitled)" : console.field(summary.title)
                let preview = console.field(summary.preview.prefix(60))
                console.write("  \(console.field(summary.id.prefix(8)))  \(date)  \(title)  \(console.dim("(\(summary.messageCount) messages) \(preview)"))\n")
            }
            listOffset += page.count
            console.write(console.dim("\(listOffset) of \(total)" + (listOffset < total ? " — /more for the next 50" : "")) + "\n")
        } catch {
            console.error("afm: \(error)")
        }
    }

    private func open(_ id: String) {
        guard !id.isEmpty else {
            console.write("usage: /open ID (see /list)\n")
            return
        }
        do {
            guard let conversation = try store.conversation(id: id) else {
                console.write("no conversation \(console.field(id)) (see /list)\n")
                return
            }
            saveDraftIfChanged()
            current = conversation
            try store.setAppState("current_conversation", conversation.id)
            console.write(console.bold("\"\(console.field(conversation.title))\"") + " (\(console.field(conversation.id.prefix(8))), \(conversation.messageCount) messages)\n")
            earliestShown = nil
            showMessages(try store.messages(conversationID: conversation.id, limit: 60), header: true)
            showDraft(conversation.draft)
        } catch {
            console.error("afm: \(error)")
        }
    }

    private func earlier() {
        guard let current else {
            console.write("no conversation is open\n")
            return
        }
        guard let before = earliestShown, before > 0 else {
            console.write("no earlier messages\n")
            return
        }
        do {
            let messages = try store.messages(conversationID: current.id, before: before, limit: 60)
            if messages.isEmpty {
                console.write("no earlier messages\n")
                return
            }
            showMessages(messages, header: true)
        } catch {
            console.error("afm: \(error)")
        }
    }

    private func showMessages(_ messages: [ChatMessage]?, header: Bool) {
        guard let messages, !messages.isEmpty else { return }
        if header, let first = messages.first, first.sequence > 0 {
            console.write(console.dim("(earlier messages: /earlier)") + "\n")
        }
        for message in messages { show(message) }
        earliestShown = min(earliestShown ?? Int64.max, messages.first?.sequence ?? 0)
    }

    private func show(_ message: ChatMessage) {
        let label = message.author == .user ? "you> " : "\(console.field(message.model ?? "assistant"))> "
        var text = console.shown(message.text)
        for image in message.images { text += " [image \(image.width)×\(image.height)]" }
        if message.author == .assistant {
            var renderer = console.markdownRenderer()
            console.write(console.bold(label) + renderer.feed(text) + renderer.finish() + "\n")
        } else {
            console.write(console.bold(label) + text + "\n")
        }
        if message.state != .complete {
            console.write(console.dim("[\(message.state.rawValue)\(message.notice.map { ": " + console.field($0) } ?? "") — /retry to ask again]") + "\n")
        }
    }

    private func search(_ text: String) {
        guard !text.isEmpty else {
            console.write("usage: /search TEXT\n")
            return
        }
        do {
            let hits = try store.search(text)
            if hits.isEmpty {
                console.write("nothing found for \"\(console.field(text))\"\n")
                return
            }
            for hit in hits {
                let place = hit.sequence.map { "#\($0)" } ?? "title"
                let snippet = console.field(hit.snippet.split(whereSeparator: \.isNewline).joined(separator: " "))
                console.write("  \(console.field(hit.conversationID.prefix(8)))  \(console.field(hit.title.prefix(40)))  \(console.dim(place))  \(snippet)\n")
            }
            console.write(console.dim("\(hits.count) match(es) — /open ID to read one") + "\n")
        } catch {
            console.error("afm: \(error)")
        }
    }

    private func rename(_ title: String) {
        guard let conversation = current else {
            console.write("no conversation is open\n")
            return
        }
        guard !title.isEmpty else {
            console.write("usage: /rename TITLE\n")
            return
        }
        do {
            try store.rename(conversationID: conversation.id, to: title)
            current?.title = title
            console.write("renamed to \"\(console.field(title))\"\n")
        } catch {
            console.error("afm: \(error)")
        }
    }

    private func delete() {
        guard let conversation = current.flatMap({ try? store.conversation(id: $0.id) }) else {
            console.write("no conversation is open (/open one first)\n")
            return
        }
        saveDraftIfChanged()
        confirmingDelete = conversation
        console.write("delete \"\(console.field(conversation.title))\" and its \(conversation.messageCount) messages? type y to confirm\n")
    }

    private func attach(_ path: String) {
        guard !path.isEmpty else {
            console.write("usage: /attach PATH\n")
            return
        }
        let expanded = path.hasPrefix("~/") ? NSHomeDirectory() + path.dropFirst(1) : path
        guard let data = FileManager.default.contents(atPath: expanded) else {
            console.write("cannot read \(path)\n")
            return
        }
        guard attachments.count < InferenceWindow.maximumImages else {
            console.write("at most \(InferenceWindow.maximumImages) images per message\n")
            return
        }
        do {
            let image = try ImageNormalizer().normalize([UInt8](data))
            attachments.append(image)
            let size = image.bytes.count >= 1024 * 1024
                ? String(format: "%.1f MiB", Double(image.bytes.count) / 1_048_576) : "\(image.bytes.count / 1024) KiB"
            console.write("attached \((path as NSString).lastPathComponent) (\(image.width)×\(image.height) \(image.mimeType), \(size)) — sent with your next message\n")
        } catch {
            console.write("cannot attach \(path): \(error)\n")
        }
    }

    private func retry() {
        guard let conversation = current,
            let messages = try? store.messages(conversationID: conversation.id, limit: 2),
            let answer = messages.last, answer.author == .assistant, answer.state.isRetryable,
            let user = messages.first, user.author == .user
        else {
            console.write("nothing to retry: the last answer is complete\n")
            return
        }
        send(user.parts, storedImages: true)  // attachments made since stay for the next message
    }

    private func copy() {
        guard let conversation = current,
            let messages = try? store.messages(conversationID: conversation.id, limit: 2),
            let answer = messages.last(where: { $0.author == .assistant })
        else {
            console.write("no answer to copy\n")
            return
        }
        let text = answer.text
        // Shown neutralized; the clipboard gets the text as it is (base64 inside OSC 52, so it is inert on the way).
        console.write("\n" + console.shown(text) + (text.hasSuffix("\n") ? "" : "\n") + "\n")
        if console.isTerminal {
            // OSC 52: terminals (and tmux with set-clipboard) that allow it put the text on the clipboard.
            console.write("\u{1B}]52;c;\(Data(text.utf8).base64EncodedString())\u{07}")
            console.write(console.dim("(copied to the clipboard if your terminal allows OSC 52)") + "\n")
        }
    }

    // MARK: - Sending

    private func resolveModel() -> String? {
        if let model { return model }
        if let requestedModel {
            model = requestedModel
            return model
        }
        do {
            guard let first = try client.listModels().first else {
                console.write("the gateway at \(console.field(client.url.description)) serves no models\n")
                return nil
            }
            model = first
            return first
        } catch {
            console.write("cannot reach the gateway at \(console.field(client.url.description)): \(console.field("\(error)"))\n")
            return nil
        }
    }

    /// Sends a message: `typed` plus the attachments (unless `storedImages`: a retry's stored parts).
    ///
    /// - Parameter typedLine: the prompt line it came from; put back on the prompt (and so kept as the draft)
    ///   when the send fails before the message is stored.
    private func send(_ typed: [ContentPart], storedImages: Bool = false, typedLine: String? = nil) {
        var stored = false
        defer {
            if !stored, let typedLine, terminal != nil { editor.set(typedLine) }
        }
        guard let model = resolveModel() else { return }
        do {
            var parts = typed
            if !storedImages {
                for image in attachments {
                    parts.append(
                        .image(try store.storeImage(image.bytes, mimeType: image.mimeType, width: image.width, height: image.height)))
                }
            }
            let conversation: ConversationSummary
            if let current {
                conversation = current
            } else {
                conversation = try store.createConversation()
                // The line's draft belongs to the new conversation from here (empty so far): if the turn fails
                // below, the line goes back on the prompt and the next save writes it there.
                current = conversation
                if terminal != nil {
                    savedDraft = ""
                    try store.saveDraft("", conversationID: nil)
                }
                try store.setAppState("current_conversation", conversation.id)
            }
            let history = try store.messages(conversationID: conversation.id, limit: 1_000)
            let (_, answer) = try store.beginTurn(
                conversationID: conversation.id, userParts: parts, model: model, clearingDraft: terminal != nil)
            stored = true
            if !storedImages { attachments = [] }
            if terminal != nil { savedDraft = "" }
            console.write(console.bold("\(console.field(model))> "))
            let runner = TurnRunner(client: client, console: console)
            let outcome = runner.run(
                model: model, history: history, parts: parts, imageBytes: { try store.imageBytes($0) },
                keyboard: keyboard,
                onKeys: { bytes in
                    if let stop = bytes.firstIndex(of: 0x03) {
                        typeAhead += bytes[(stop + 1)...]
                        return true
                    }
                    typeAhead += bytes
                    return false
                },
                onProgress: { text in try? store.updateAnswer(messageID: answer.id, text: text) }
            )
            try store.finishAnswer(
                messageID: answer.id, text: outcome.text, state: outcome.state, model: outcome.model, notice: outcome.notice)
            if !outcome.text.hasSuffix("\n") { console.write("\n") }
            if outcome.state != .complete {
                console.write(console.dim("[\(outcome.state.rawValue)\(outcome.notice.map { ": " + console.field($0) } ?? "") — /retry to ask again]") + "\n")
            }
            current = try store.conversation(id: conversation.id)
        } catch {
            console.error("afm: \(error)")
            if let open = current, isGone(open) { conversationGone(open) }
        }
    }

    static func format(milliseconds: Int64) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        return formatter.string(from: Date(timeIntervalSince1970: Double(milliseconds) / 1000))
    }
}
