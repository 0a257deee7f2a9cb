package io.sendonce

/**
 * Marks the raw generated core (`SendOnceCore`, `ComposerCore`, `IoProbe`): an app that names one gets a
 * compile error unless it opts in. Apps use [SendOnce] / [SendOnceClient] and [Composer] /
 * [ComposerClient], which keep disk and network off the caller's thread and close cleanly.
 * scripts/gen-bindings puts the mark on the generated classes; this module opts in for itself.
 */
@RequiresOptIn(
    level = RequiresOptIn.Level.ERROR,
    message = "The raw generated core: use SendOnce / SendOnceClient and Composer / ComposerClient instead.",
)
@Retention(AnnotationRetention.RUNTIME)
@Target(AnnotationTarget.CLASS)
annotation class InternalSendOnceApi
