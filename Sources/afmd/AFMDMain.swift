@main struct AFMD { static func main() {} }
