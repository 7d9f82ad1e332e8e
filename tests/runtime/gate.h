// A host function that holds its stream until the test opens the gate,
// for the VM tests of the runtime.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

// A host function that holds its stream until the test opens the gate.
class Gate {
public:
	static void hostFn(void *gate) { static_cast<Gate *>(gate)->pass(); }

	void open()
	{
		{
			std::lock_guard<std::mutex> lock(mutex_);
			open_ = true;
		}
		cv_.notify_all();
	}
	bool isOpen()
	{
		std::lock_guard<std::mutex> lock(mutex_);
		return open_;
	}
	// Whether a host function reached the gate within timeoutMs.
	bool waitReached(int timeoutMs)
	{
		std::unique_lock<std::mutex> lock(mutex_);
		return cv_.wait_for(lock, std::chrono::milliseconds(timeoutMs),
		                    [this] { return reached_ > 0; });
	}
	int passed()
	{
		std::lock_guard<std::mutex> lock(mutex_);
		return passed_;
	}

private:
	void pass()
	{
		std::unique_lock<std::mutex> lock(mutex_);
		reached_++;
		cv_.notify_all();
		cv_.wait(lock, [this] { return open_; });
		passed_++;
	}

	std::mutex mutex_;
	std::condition_variable cv_;
	bool open_ = false;
	int reached_ = 0;
	int passed_ = 0;
};
