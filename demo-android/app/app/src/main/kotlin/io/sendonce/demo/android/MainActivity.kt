package io.sendonce.demo.android

import android.app.Application
import android.content.Context
import android.net.ConnectivityManager
import android.net.Network
import android.os.Bundle
import androidx.activity.ComponentActivity
import androidx.activity.compose.setContent
import androidx.activity.enableEdgeToEdge
import androidx.activity.viewModels
import androidx.lifecycle.AndroidViewModel
import androidx.lifecycle.SavedStateHandle
import androidx.lifecycle.viewModelScope
import io.sendonce.demo.DemoViewModel
import io.sendonce.demo.ScreenMemory
import io.sendonce.demo.Texts

/** The view model's [SavedStateHandle] behind the screen's memory: it survives process death. */
class SavedStateMemory(private val handle: SavedStateHandle) : ScreenMemory {
    override var transferId: String?
        get() = handle[KEY]
        set(value) {
            handle[KEY] = value
        }

    private companion object {
        const val KEY = "sendonce.transferId"
    }
}

/**
 * Platform lifecycle only: owns the plain-Kotlin [DemoViewModel] for as long as the screen lives (survives
 * rotation; its saved state survives process death), and forwards the system's connectivity changes to it.
 * The SDK's database lives in no-backup storage: a restored backup must never bring back a stale copy of
 * the transfers. No transfer logic here.
 */
class DemoAndroidViewModel(app: Application, handle: SavedStateHandle) : AndroidViewModel(app) {
    init {
        Texts.locale = app.resources.configuration.locales[0]
    }

    val demo = DemoViewModel(
        filesDir = app.filesDir,
        scope = viewModelScope,
        memory = SavedStateMemory(handle),
        databaseDir = app.noBackupFilesDir,
        // From the first open: a transfer confirmed now is drained by WorkManager even if the app is swiped
        // away at once (an expedited unique work, KEEP), and one left unfinished at start is too.
        onSdkOpened = { sdk -> SendWorker.background(app).attach(sdk, viewModelScope) },
    )

    private val connectivity = app.getSystemService(Context.CONNECTIVITY_SERVICE) as ConnectivityManager
    private val networkCallback = object : ConnectivityManager.NetworkCallback() {
        override fun onAvailable(network: Network) = demo.onNetworkChanged(true)
        override fun onLost(network: Network) = demo.onNetworkChanged(false)
    }

    init {
        // No callback comes when there is no network at all, so start from the current answer.
        demo.onNetworkChanged(connectivity.activeNetwork != null)
        connectivity.registerDefaultNetworkCallback(networkCallback)
    }

    override fun onCleared() {
        connectivity.unregisterNetworkCallback(networkCallback)
        // The screen is gone, the shared SDK is not: it goes on in the background, and the work enqueued at
        // confirm (or at start) drains whatever is left when the OS gives it time and a network.
        demo.close()
    }
}

/** The one screen: lays out the view model's state and forwards taps. */
class MainActivity : ComponentActivity() {
    private val model: DemoAndroidViewModel by viewModels()

    override fun onCreate(savedInstanceState: Bundle?) {
        super.onCreate(savedInstanceState)
        enableEdgeToEdge()
        setContent { DemoApp(model.demo) }
    }
}
