package io.sendonce

/**
 * The SDK's log lines, from [level] up, to [sink] (Logcat, a crash reporter); `null` stops them. Only the
 * SDK's own lines, and none names a recipient, a note or a token unless the config sets `logPersonalData`.
 * Called on whichever thread logged: do not block.
 */
@Throws(SendOnceException::class)
fun setSendOnceLogSink(level: LogLevel, sink: ((LogRecord) -> Unit)?) {
    setLogSink(
        sink?.let { body ->
            object : LogSink {
                override fun log(record: LogRecord) {
                    try {
                        body(record)
                    } catch (e: Throwable) {
                        if (e is VirtualMachineError) throw e
                    }
                }
            }
        },
        level,
    )
}
