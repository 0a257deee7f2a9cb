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
import androidx.lifecycle.viewModelScope
import io.sendonce.demo.DemoViewModel

/**
 * Platform lifecycle only: owns the plain-Kotlin [DemoViewModel] for as long as the screen lives (survives
 * rotation), and forwards the system's connectivity changes to it. No transfer logic here.
 */
class DemoAndroidViewModel(app: Application) : AndroidViewModel(app) {
    val demo = DemoViewModel(filesDir = app.filesDir, scope = viewModelScope)

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
        // The screen is gone, the shared SDK is not: it goes on in the background, and the worker drains
        // whatever is left when the OS gives it time and a network.
        demo.close()
        SendWorker.enqueue(getApplication(), delayMs = 0)
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
