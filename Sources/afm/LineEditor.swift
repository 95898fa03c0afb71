// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMLogging

/// The input line of `afm chat`: key bytes in, finished lines and screen updates out.
///
/// On a terminal it is an Emacs-style editor:
///
/// | keys                                   | does                                                     |
/// |----------------------------------------|----------------------------------------------------------|
/// | Left/Right, Ctrl-B/Ctrl-F              | move a character                                         |
/// | Ctrl-Left/Right, Alt-B/Alt-F           | move a word                                              |
/// | Home/End, Ctrl-A/Ctrl-E                | start/end of the line (of the current line in a block)   |
/// | Up/Down, Ctrl-P/Ctrl-N                 | the line above/below in a block, else earlier inputs     |
/// | Ctrl-R                                 | search earlier inputs (again: older match; Enter sends;  |
/// |                                        | Esc or a movement keeps the match for editing; Ctrl-G    |
/// |                                        | puts the line back)                                      |
/// | Alt-Enter, Ctrl-J                      | a line break inside the message (Enter sends)            |
/// | Backspace, Delete, Ctrl-D              | delete a character (Ctrl-D on an empty line: leave)      |
/// | Ctrl-W, Alt-Backspace, Alt-D           | delete a word back / forward                             |
/// | Ctrl-U, Ctrl-K, Ctrl-Y                 | cut to the start / to the end, paste what was cut        |
/// | Ctrl-L                                 | clear the screen                                         |
/// | Ctrl-C                                 | clear the line                                           |
///
/// A paste arrives between the terminal's bracketed-paste marks (`ESC[200~` … `ESC[201~`, switched on by
/// ``ChatSession``): its line breaks become part of the message instead of sending it early.
///
/// On a pipe (`echo: false`) it only splits lines at CR or LF and draws nothing.
///
/// Keys never insert a control character other than a tab or (Alt-Enter, a paste) a line break: a pasted C1
/// control such as U+009B or a bidirectional override is dropped. A line set from outside (a draft restored from
/// the history or an imported archive) keeps its text as stored, and the terminal is sent it neutralized
/// (``TerminalSafeText``), one display cell at a time.
struct LineEditor {
    /// What a key did.
    enum Action: Equatable {
        case line(String)
        case endOfInput
        case interrupt
    }

    /// An incremental search of earlier inputs (Ctrl-R).
    private struct Search {
        var query: [Character] = []
        /// The index in ``history`` of the entry shown, nil when nothing matches.
        var match: Int?
        var savedLine: [Character]
        var savedCursor: Int
    }

    let echo: Bool
    private(set) var characters: [Character] = []
    private(set) var cursor = 0
    /// Earlier inputs, oldest first (Up/Down and Ctrl-R walk them).
    var history: [String] = [] {
        didSet { historyIndex = nil }
    }
    private var historyIndex: Int?
    /// The line being typed before Up went into the history.
    private var editedLine: [Character] = []
    private var search: Search?
    /// An escape sequence being read (starts with ESC).
    private var escape: [UInt8]?
    private var utf8: [UInt8] = []
    private var utf8Expected = 0
    private var pasting = false
    private var pasteAfterCR = false
    private var cutText: [Character] = []
    private var clearScreen = false
    /// Whether the line changed since it was last drawn.
    private(set) var needsRedraw = false

    // What is on the screen.
    private var prompt = ""
    private var promptWidth = 0
    private var drawnCursorRow = 0
    private var columns = 80

    init(echo: Bool, initial: String = "") {
        self.echo = echo
        set(initial)
    }

    var text: String { String(characters) }

    /// Replaces the line (a draft, a failed send put back); the cursor goes to its end.
    mutating func set(_ text: String) {
        characters = Array(text)
        cursor = characters.count
        historyIndex = nil
        search = nil
        needsRedraw = true
    }

    // MARK: - Keys

    /// Feeds one key byte; returns an action when a line is finished (or input ends), and appends to `output`
    /// what the terminal needs at once (the final state of a finished line). Edits set ``needsRedraw``; the caller
    /// draws them with ``redraw(columns:)`` after a batch of bytes.
    mutating func feed(_ byte: UInt8, echoing output: inout String) -> Action? {
        guard echo else { return feedPiped(byte) }
        if var sequence = escape {
            sequence.append(byte)
            if sequence == [0x1B, 0x1B] {
                escape = [0x1B]  // a lone Esc, then another sequence
                endSearch(keeping: true)
                return nil
            }
            guard Self.isComplete(sequence) else {
                escape = sequence.count > 32 ? nil : sequence
                return nil
            }
            escape = nil
            return escapeSequence(sequence, output: &output)
        }
        if byte >= 0x80 || (utf8Expected > 0 && byte & 0xC0 == 0x80) { return collectUTF8(byte) }
        if utf8Expected > 0 {
            utf8Expected = 0  // a broken UTF-8 sequence is dropped; this key still counts
            utf8 = []
        }
        if byte == 0x1B {
            escape = [0x1B]
            return nil
        }
        if pasting { return pasted(byte) }
        if search != nil { return searchKey(byte, output: &output) }
        return key(byte, output: &output)
    }

    /// A pipe: lines end at CR or LF; nothing else is interpreted (drafts are not kept for pipes).
    private mutating func feedPiped(_ byte: UInt8) -> Action? {
        switch byte {
        case 0x0D, 0x0A:
            let line = text
            characters = []
            cursor = 0
            return .line(line)
        case 0x04 where characters.isEmpty: return .endOfInput
        case 0x03:
            characters = []
            cursor = 0
            return .interrupt
        default:
            if byte < 0x20 && byte != 0x09 || byte == 0x7F { return nil }
            return collectUTF8(byte)
        }
    }

    private mutating func key(_ byte: UInt8, output: inout String) -> Action? {
        switch byte {
        case 0x0D: return submit(output: &output)
        case 0x0A: insert("\n")
        case 0x03:
            output += finishDisplay(suffix: "^C")
            reset()
            return .interrupt
        case 0x04:
            if characters.isEmpty { return .endOfInput }
            deleteForward()
        case 0x7F, 0x08: deleteBackward()
        case 0x01: moveHome()
        case 0x05: moveEnd()
        case 0x02: move(to: cursor - 1)
        case 0x06: move(to: cursor + 1)
        case 0x10: up()
        case 0x0E: down()
        case 0x0B: cut(cursor..<lineEnd())
        case 0x15: cut(lineStart()..<cursor)
        case 0x17: cut(wordStart(before: cursor)..<cursor)
        case 0x19: for character in cutText { insert(character) }
        case 0x0C:
            clearScreen = true
            needsRedraw = true
        case 0x12: startSearch()
        case 0x09: insert("\t")
        default:
            if byte >= 0x20 && byte < 0x7F { insert(Character(Unicode.Scalar(byte))) }
        }
        return nil
    }

    /// A key inside a paste: line breaks are text; other controls but the tab are dropped.
    private mutating func pasted(_ byte: UInt8) -> Action? {
        defer { pasteAfterCR = byte == 0x0D }
        switch byte {
        case 0x0D: insert("\n")
        case 0x0A: if !pasteAfterCR { insert("\n") }
        case 0x09: insert("\t")
        case 0x20..<0x7F: insert(Character(Unicode.Scalar(byte)))
        default: break
        }
        return nil
    }

    private mutating func collectUTF8(_ byte: UInt8) -> Action? {
        if utf8Expected == 0 {
            utf8 = [byte]
            utf8Expected = byte >= 0xF0 ? 3 : byte >= 0xE0 ? 2 : byte >= 0xC0 ? 1 : 0
        } else if byte & 0xC0 == 0x80 {
            utf8.append(byte)
            utf8Expected -= 1
        } else {
            // A broken sequence: drop it and start again with this byte.
            utf8Expected = 0
            utf8 = []
            return byte < 0x80 ? nil : collectUTF8(byte)
        }
        guard utf8Expected == 0 else { return nil }
        let decoded = String(decoding: utf8, as: UTF8.self)
        utf8 = []
        // A pasted C1 control (U+009B is CSI) or bidirectional override is never part of the line.
        guard !TerminalSafeText.needsEscaping(decoded, keeping: .tab), let character = decoded.first else { return nil }
        if echo && search != nil {
            search?.query.append(character)
            findMatch(from: history.count - 1)
        } else {
            insert(character)
        }
        return nil
    }

    private mutating func escapeSequence(_ sequence: [UInt8], output: inout String) -> Action? {
        let kind = sequence[1]
        if kind != UInt8(ascii: "[") && kind != UInt8(ascii: "O") {
            if pasting { return nil }
            endSearch(keeping: true)
            switch kind {
            case UInt8(ascii: "b"), UInt8(ascii: "B"): move(to: wordStart(before: cursor))
            case UInt8(ascii: "f"), UInt8(ascii: "F"): move(to: wordEnd(after: cursor))
            case 0x0D, 0x0A: insert("\n")
            case 0x7F, 0x08: cut(wordStart(before: cursor)..<cursor)
            case UInt8(ascii: "d"), UInt8(ascii: "D"): cut(cursor..<wordEnd(after: cursor))
            default:
                // Esc, then a key: the key counts as typed (Esc alone only ends a search).
                if kind >= 0x20 && kind < 0x7F { insert(Character(Unicode.Scalar(kind))) }
            }
            return nil
        }
        let final = sequence[sequence.count - 1]
        let parameters = String(decoding: sequence[2..<(sequence.count - 1)], as: UTF8.self)
        // Inside a paste only its end mark counts: pasted text never moves the cursor or edits.
        if pasting && !(final == UInt8(ascii: "~") && parameters == "201") { return nil }
        if final == UInt8(ascii: "~") {
            switch parameters {
            case "200":
                endSearch(keeping: true)
                pasting = true
                pasteAfterCR = false
            case "201": pasting = false
            case "1", "7": endSearch(keeping: true); moveHome()
            case "4", "8": endSearch(keeping: true); moveEnd()
            case "3": endSearch(keeping: true); deleteForward()
            default: break
            }
            return nil
        }
        endSearch(keeping: true)
        // Ctrl (5) or Alt (3) with an arrow moves a word.
        let byWord = parameters.hasSuffix(";5") || parameters.hasSuffix(";3")
        switch final {
        case UInt8(ascii: "A"): up()
        case UInt8(ascii: "B"): down()
        case UInt8(ascii: "C"): move(to: byWord ? wordEnd(after: cursor) : cursor + 1)
        case UInt8(ascii: "D"): move(to: byWord ? wordStart(before: cursor) : cursor - 1)
        case UInt8(ascii: "H"): moveHome()
        case UInt8(ascii: "F"): moveEnd()
        default: break
        }
        return nil
    }

    /// Whether `sequence` (ESC …) is a whole key: ESC x, ESC O x, or a CSI ending in a final byte.
    private static func isComplete(_ sequence: [UInt8]) -> Bool {
        guard sequence.count >= 2 else { return false }
        switch sequence[1] {
        case UInt8(ascii: "["): return sequence.count >= 3 && (0x40...0x7E).contains(sequence[sequence.count - 1])
        case UInt8(ascii: "O"): return sequence.count >= 3
        default: return true
        }
    }

    // MARK: - Editing

    private mutating func insert(_ character: Character) {
        characters.insert(character, at: cursor)
        cursor += 1
        needsRedraw = true
    }

    private mutating func move(to position: Int) {
        let clamped = min(max(0, position), characters.count)
        guard clamped != cursor else { return }
        cursor = clamped
        needsRedraw = true
    }

    private mutating func deleteBackward() {
        guard cursor > 0 else { return }
        characters.remove(at: cursor - 1)
        cursor -= 1
        needsRedraw = true
    }

    private mutating func deleteForward() {
        guard cursor < characters.count else { return }
        characters.remove(at: cursor)
        needsRedraw = true
    }

    private mutating func cut(_ range: Range<Int>) {
        guard !range.isEmpty else { return }
        cutText = Array(characters[range])
        characters.removeSubrange(range)
        cursor = range.lowerBound
        needsRedraw = true
    }

    private func lineStart(_ position: Int? = nil) -> Int {
        var index = position ?? cursor
        while index > 0 && characters[index - 1] != "\n" { index -= 1 }
        return index
    }

    private func lineEnd(_ position: Int? = nil) -> Int {
        var index = position ?? cursor
        while index < characters.count && characters[index] != "\n" { index += 1 }
        return index
    }

    private mutating func moveHome() { move(to: lineStart()) }
    private mutating func moveEnd() { move(to: lineEnd()) }

    private static func isWordCharacter(_ character: Character) -> Bool { character.isLetter || character.isNumber || character == "_" }

    private func wordStart(before position: Int) -> Int {
        var index = position
        while index > 0 && !Self.isWordCharacter(characters[index - 1]) { index -= 1 }
        while index > 0 && Self.isWordCharacter(characters[index - 1]) { index -= 1 }
        return index
    }

    private func wordEnd(after position: Int) -> Int {
        var index = position
        while index < characters.count && !Self.isWordCharacter(characters[index]) { index += 1 }
        while index < characters.count && Self.isWordCharacter(characters[index]) { index += 1 }
        return index
    }

    /// Up: the line above inside a multi-line message, else the previous input.
    private mutating func up() {
        let start = lineStart()
        if start > 0 {
            let column = cursor - start
            let previousStart = lineStart(start - 1)
            move(to: min(previousStart + column, start - 1))
            return
        }
        guard !history.isEmpty else { return }
        let index: Int
        if let current = historyIndex {
            guard current > 0 else { return }
            index = current - 1
        } else {
            editedLine = characters
            index = history.count - 1
        }
        historyIndex = index
        characters = Array(history[index])
        cursor = characters.count
        needsRedraw = true
    }

    /// Down: the line below inside a multi-line message, else the next input (past the newest: the line typed).
    private mutating func down() {
        let end = lineEnd()
        if end < characters.count {
            let column = cursor - lineStart()
            let nextStart = end + 1
            move(to: min(nextStart + column, lineEnd(nextStart)))
            return
        }
        guard let current = historyIndex else { return }
        if current + 1 < history.count {
            historyIndex = current + 1
            characters = Array(history[current + 1])
        } else {
            historyIndex = nil
            characters = editedLine
        }
        cursor = characters.count
        needsRedraw = true
    }

    private mutating func submit(output: inout String) -> Action {
        endSearch(keeping: true)
        let line = text
        output += finishDisplay(suffix: "")
        reset()
        return .line(line)
    }

    private mutating func reset() {
        characters = []
        cursor = 0
        historyIndex = nil
        search = nil
        pasting = false
        needsRedraw = false
    }

    // MARK: - Search

    private mutating func startSearch() {
        if search != nil {
            findMatch(from: (search?.match ?? history.count) - 1)  // Ctrl-R again: the next older match
        } else {
            search = Search(savedLine: characters, savedCursor: cursor)
            needsRedraw = true
        }
    }

    /// Looks for the newest entry at or before `index` containing the query.
    private mutating func findMatch(from index: Int) {
        guard var current = search else { return }
        needsRedraw = true
        let query = String(current.query)
        var position = min(index, history.count - 1)
        while position >= 0 {
            if query.isEmpty || history[position].contains(query) {
                current.match = position
                search = current
                return
            }
            position -= 1
        }
        // Nothing older matches: the shown match stays (an empty query shows the newest entry).
        if let shown = current.match, !history[shown].contains(query) { current.match = nil }
        search = current
    }

    /// A key while searching; returns nil when it was a search key (also when it ended the search).
    private mutating func searchKey(_ byte: UInt8, output: inout String) -> Action? {
        switch byte {
        case 0x12:
            startSearch()
            return nil
        case 0x7F, 0x08:
            _ = search?.query.popLast()
            findMatch(from: history.count - 1)
            return nil
        case 0x07, 0x03:
            endSearch(keeping: false)
            return nil
        case 0x20..<0x7F:
            search?.query.append(Character(Unicode.Scalar(byte)))
            findMatch(from: (search?.match ?? history.count - 1))
            return nil
        case 0x0D:
            endSearch(keeping: true)
            return submit(output: &output)
        default:
            // Any other key keeps the match on the line and does its usual job.
            endSearch(keeping: true)
            return key(byte, output: &output)
        }
    }

    /// Ends a search: the match becomes the line (`keeping`), or the line from before comes back.
    private mutating func endSearch(keeping: Bool) {
        guard let current = search else { return }
        search = nil
        needsRedraw = true
        if keeping, let match = current.match {
            characters = Array(history[match])
            cursor = characters.count
        } else {
            characters = current.savedLine
            cursor = current.savedCursor
        }
    }

    // MARK: - Drawing

    /// Draws a new prompt with the line (the cursor is at the start of an empty screen line).
    mutating func start(prompt: String, columns: Int) -> String {
        self.prompt = prompt
        promptWidth = TerminalColumns.width(of: prompt)
        drawnCursorRow = 0
        needsRedraw = true
        return redraw(columns: columns)
    }

    /// Draws the line again after edits or a change of terminal width.
    mutating func redraw(columns: Int) -> String {
        guard echo else { return "" }
        self.columns = max(columns, 8)
        needsRedraw = false
        var output = ""
        if clearScreen {
            clearScreen = false
            output += "\u{1B}[H\u{1B}[2J"
        } else {
            output += "\r"
            if drawnCursorRow > 0 { output += "\u{1B}[\(drawnCursorRow)A" }
        }
        let layout = layout()
        output += "\u{1B}[J" + layout.text
        let up = layout.endRow - layout.cursorRow
        if up > 0 { output += "\u{1B}[\(up)A" }
        output += "\r"
        if layout.cursorColumn > 0 { output += "\u{1B}[\(layout.cursorColumn)C" }
        drawnCursorRow = layout.cursorRow
        return output
    }

    /// Moves below the drawn line (after `suffix`) so that output continues on a fresh line.
    private mutating func finishDisplay(suffix: String) -> String {
        var output = needsRedraw ? redraw(columns: columns) : ""
        let layout = layout()
        let down = layout.endRow - drawnCursorRow
        if down > 0 { output += "\u{1B}[\(down)B" }
        output += "\r"
        if layout.endColumn > 0 { output += "\u{1B}[\(layout.endColumn)C" }
        output += suffix + "\n"
        drawnCursorRow = 0
        return output
    }

    /// The text that draws the prompt and the line (with explicit breaks where lines wrap), and where the
    /// cursor and the end land.
    private func layout() -> (text: String, cursorRow: Int, cursorColumn: Int, endRow: Int, endColumn: Int) {
        var text = ""
        var row = 0
        var column = 0
        var cursorAt = (0, 0)
        let shownPrompt: String
        let shownLine: [Character]
        let shownCursor: Int
        if let search {
            let match = search.match.map { history[$0] } ?? ""
            shownPrompt = "(search) \(TerminalSafeText.neutralized(String(search.query))): "
            shownLine = Array(match)
            shownCursor = shownLine.count
        } else {
            shownPrompt = prompt
            shownLine = characters
            shownCursor = cursor
        }
        text += shownPrompt
        column = search == nil ? promptWidth : TerminalColumns.width(of: shownPrompt)
        while column >= columns {
            column -= columns
            row += 1
        }
        let indent = min(promptWidth, 8)
        for (index, character) in shownLine.enumerated() {
            if character == "\n" {
                if index == shownCursor { cursorAt = (row, column) }
                text += "\r\n" + String(repeating: " ", count: indent)
                row += 1
                column = indent
                continue
            }
            var first = true
            for cell in Self.cells(character) {
                let width = TerminalColumns.width(cell)
                if column + width > columns {
                    text += "\r\n"
                    row += 1
                    column = 0
                }
                if first && index == shownCursor { cursorAt = (row, column) }
                first = false
                text.append(cell)
                column += width
            }
        }
        if shownCursor >= shownLine.count {
            if column >= columns {
                text += "\r\n"
                row += 1
                column = 0
            }
            cursorAt = (row, column)
        }
        return (text, cursorAt.0, cursorAt.1, row, column)
    }

    /// What the terminal is sent for one character of the line: a tab as spaces, a control character escaped.
    private static func cells(_ character: Character) -> [Character] {
        if character == "\t" { return Array("    ") }
        let text = String(character)
        guard TerminalSafeText.needsEscaping(text) else { return [character] }
        return Array(TerminalSafeText.neutralized(text))
    }
}
