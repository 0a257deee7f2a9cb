package io.sendonce.demo

/**
 * What the screen keeps across process death: the local id of the transfer it shows. Android backs it with
 * the view model's `SavedStateHandle` (see the app's `SavedStateMemory`); the SDK decides what to re-attach
 * from it (`SendOnce.restoreComposer`), so a receipt is still on screen after the system killed the app.
 */
interface ScreenMemory {
    /** The local id of the transfer on screen; null while the form is being filled in. */
    var transferId: String?
}

/** A [ScreenMemory] that lives as long as the object (tests share one between two view models). */
class InMemoryScreenMemory(override var transferId: String? = null) : ScreenMemory
